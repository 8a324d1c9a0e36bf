"""A bundle's checks run on the machine model instead of the CPU.

`kerngen test --on-model`, and plain `kerngen test` for the functions this
CPU cannot run, call the kernels through `passes.interpret` with the same
`Calls` the C harness gives the checks: `run(cases)` once per case (the
cases of one function and one aliasing run together, a row each) and
`batch(function, inputs)`. The model runs the bundle's own code: each
function read back from the assembly of its native object (`emission.reader`),
whatever kerngen version wrote it and whatever was edited in it since, so
that a change the CPU would run is what the model runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.family import Calls
from ..core.manifest import Manifest
from ..emission.reader import Reading, read_object
from ..harness import protocol
from ..harness.protocol import Case, CaseResult
from ..ir.instr import Kernel
from ..machine.target import NATIVE
from ..passes.interpret import ModelError, Program, compile_kernel


def bundle_kernels(directory: Path, manifest: Manifest) -> Reading:
    """The manifest's functions read from the assembly of the bundle in
    `directory`: its native object's (the one this machine would run), else
    its first; and, by symbol, why a function could not be read. The
    functions of the bundle's C units (drivers) are not in it."""
    obj = next((o for o in manifest.objects if o.abi == NATIVE.name), manifest.objects[0])
    return read_object(directory / obj.file, obj, [f for f in manifest.functions if not driver(f)])


def driver(fn) -> bool:
    """Whether a manifest function is defined in one of the bundle's C units."""
    return "unit" in fn.facts


@dataclass(frozen=True)
class Driven:
    """A function of a C unit on the model: its arguments, and how to run it from the kernels it calls."""

    args: tuple
    drive: Callable[[Callable, dict], dict]


class Model:
    """The kernels of a bundle on the machine model, each compiled once, when first called; its drivers
    (`Driven`) run by their family from them."""

    def __init__(self, kernels: dict[str, Kernel], drivers: dict[str, Driven] | None = None):
        self.kernels = kernels
        self.drivers = drivers or {}
        self.programs: dict[str, Program] = {}

    def calls(self) -> Calls:
        """The checks' calls, made on the model."""
        return Calls(lambda cases: run_cases(self, cases), lambda fn, inputs: run_rows(self, fn, inputs))

    def kernel(self, symbol: str) -> Kernel:
        if symbol not in self.kernels:
            raise protocol.KernelFault(f"{symbol}: no such function among the kernels read from the bundle's assembly")
        return self.kernels[symbol]

    def args(self, symbol: str) -> tuple:
        """A function's arguments (`ArgSpec`s of a kernel, or a driver's)."""
        return self.drivers[symbol].args if symbol in self.drivers else self.kernel(symbol).args

    def run(self, symbol: str, inputs: dict, aliases: dict[int, int] | None = None) -> dict[int, np.ndarray]:
        """The kernel's buffers after one call per row; the model's refusals are
        a failed check of the kernel (as a crash on the CPU is)."""
        if symbol in self.drivers:
            if aliases:
                raise protocol.KernelFault(f"{symbol}: a driver on the model takes no aliased arguments")
            return self.drivers[symbol].drive(self.run, inputs)
        try:
            if symbol not in self.programs:
                self.programs[symbol] = compile_kernel(self.kernel(symbol))
            return self.programs[symbol].run(inputs, aliases)
        except ModelError as e:
            raise protocol.KernelFault(f"on the machine model: {e}") from None


def run_cases(model: Model, cases: Sequence[Case]) -> list[CaseResult]:
    """Each case's verdict and outputs, as `protocol.run_runner` gives them;
    an input argument the kernel changes is reported as the runner does."""
    groups: dict[tuple, list[int]] = {}
    for k, c in enumerate(cases):
        groups.setdefault((c.symbol, tuple(a.alias_of for a in c.args)), []).append(k)
    results: list[CaseResult | None] = [None] * len(cases)
    for (symbol, aliases), members in groups.items():
        first = cases[members[0]].args
        if [(a.role, a.elem_bytes, a.count) for a in first] != [(a.role, a.elem_bytes, a.count) for a in model.args(symbol)]:
            raise protocol.KernelFault(f"{symbol}: the cases' arguments are not the kernel's")
        inputs = {i: _words([cases[k].args[i].data for k in members], a.elem_bytes)
                  for i, a in enumerate(first) if a.data is not None}
        after = model.run(symbol, inputs, {i: j for i, j in enumerate(aliases) if j is not None})
        shared = {j for j in aliases if j is not None}
        for row, k in enumerate(members):
            changed = next((i for i, a in enumerate(first) if a.role == "in" and i not in shared
                            and not np.array_equal(after[i][row], inputs[i][row])), None)
            outputs = {i: _read(after[i][row], a) for i, a in enumerate(first) if a.role != "in"}
            results[k] = (CaseResult(cases[k].case_id, protocol.STATUS_INMOD, str(changed)) if changed is not None
                          else CaseResult(cases[k].case_id, protocol.STATUS_OK, "", outputs))
    return results


def _words(rows: list, elem_bytes: int) -> np.ndarray:
    """Argument data (signed or unsigned values of the element width) as unsigned words."""
    values = np.array(rows, dtype=np.int64 if elem_bytes < 8 else object)
    return (values & ((1 << 8 * elem_bytes) - 1)).astype(f"<u{elem_bytes}")


def _read(words: np.ndarray, arg: protocol.Arg) -> list[int]:
    """An argument's elements as the runner's output reads them: signed unless the argument is unsigned."""
    return (words if arg.unsigned else words.view(f"<i{arg.elem_bytes}")).tolist()


def run_rows(model: Model, fn: dict, inputs: dict) -> dict[int, np.ndarray]:
    """`protocol.run_batch` on the model: the function called once per row of `inputs`."""
    kind = protocol.batch_type(fn["dtype"])
    records = len(next(iter(inputs.values())))
    data = {i: protocol.batch_rows(inputs[i], kind, records, a["count"]) for i, a in enumerate(fn["args"])
            if a["role"] != "out"}
    after = model.run(fn["symbol"], data)
    return {i: protocol.batch_output(after[i].view(kind)) for i, a in enumerate(fn["args"]) if a["role"] != "in"}
