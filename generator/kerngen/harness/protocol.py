"""The protocol of the C test and bench programs (C sources in ``harness/``):
the calls they make, the files they read and what they print.

The programs know nothing of the mathematics: ``kg_runner`` places the
buffers, calls a kernel through the checked-call stub and prints what it
wrote; ``kg_batch`` does the same for many rows of binary input; ``kg_bench``
times kernels. This module describes calls (`Arg`, `Case`), writes vector
files, runs the programs (built by `toolchain`) and parses what they print.
File formats are documented in ``harness/vectors.h`` (vectors),
``harness/runner.c`` (runner output), ``harness/batch.c`` (binary records)
and ``harness/bench.c`` (bench output).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

# one class for the whole tool, so the CLI maps harness failures to exit code 2
from ..errors import HarnessError
from .toolchain import build_batch, build_bench, build_runner

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Arg", "BenchResult", "Case", "CaseResult", "KernelFault", "batch_output", "batch_rows", "batch_type",
    "check_libs", "describe_exit", "element_bytes", "manifest_arg", "parse_runner_output", "run_batch", "run_bench",
    "run_runner", "write_vectors",
]

MAX_ARGS = 5
ROLES = ("in", "out", "inout")
ELEM_BYTES = (1, 2, 4, 8)
MAX_ALIGN = 4096

STATUS_OK = "ok"
STATUS_ABI = "abi"
STATUS_CANARY = "canary"
STATUS_INMOD = "inmod"

# kg_batch's exit status when a call broke the ABI or its buffers (harness/batch.c)
BATCH_FAULT_STATUS = 3


class KernelFault(HarnessError):
    """A kernel broke the calling convention or its buffers under the checked
    call, or crashed: a failed check of that kernel, not a failure of the
    harness (`kerngen test` counts it and goes on with the other checks)."""


_TOKEN = re.compile(r"^\S+$")
SYMBOL = re.compile(r"^[A-Za-z_.$][A-Za-z0-9_.$@]*$")


# ---------------------------------------------------------------------------
# records


@dataclass(frozen=True)
class Arg:
    """One pointer argument of a kernel, in C argument order.

    ``data`` holds the input values of an ``in``/``inout`` argument (any value
    in the signed or unsigned range of the element width); ``alias_of`` names
    the argument whose buffer this one shares (an in-place call), in which
    case this argument carries no data.
    """

    role: str
    elem_bytes: int
    count: int
    align: int
    data: tuple[int, ...] | None = None
    alias_of: int | None = None
    unsigned: bool = False  # elements read back as unsigned (the runner prints them signed)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Arg.role must be one of {ROLES}, got {self.role!r}")
        if self.elem_bytes not in ELEM_BYTES:
            raise ValueError(f"Arg.elem_bytes must be one of {ELEM_BYTES}, got {self.elem_bytes}")
        if self.count < 1:
            raise ValueError(f"Arg.count must be at least 1, got {self.count}")
        if self.align < 1 or self.align & (self.align - 1) or self.align > MAX_ALIGN:
            raise ValueError(f"Arg.align must be a power of two 1..{MAX_ALIGN}, got {self.align}")
        if self.data is not None:
            data = tuple(int(v) for v in self.data)
            object.__setattr__(self, "data", data)
            if len(data) != self.count:
                raise ValueError(f"Arg.data has {len(data)} values, count is {self.count}")
            bits = 8 * self.elem_bytes
            lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
            bad = next((v for v in data if not lo <= v <= hi), None)
            if bad is not None:
                raise ValueError(f"Arg.data value {bad} does not fit {self.elem_bytes} bytes")


@dataclass(frozen=True)
class Case:
    """One call: ``symbol`` from library number ``lib`` applied to ``args``."""

    case_id: str
    symbol: str
    args: tuple[Arg, ...]
    lib: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        if not _TOKEN.match(self.case_id):
            raise ValueError(f"Case.case_id must be one token without spaces, got {self.case_id!r}")
        if not SYMBOL.match(self.symbol):
            raise ValueError(f"case {self.case_id}: bad symbol name {self.symbol!r}")
        if self.lib < 0:
            raise ValueError(f"case {self.case_id}: lib must be >= 0")
        if not 1 <= len(self.args) <= MAX_ARGS:
            raise ValueError(f"case {self.case_id}: 1..{MAX_ARGS} arguments, got {len(self.args)}")
        for i, a in enumerate(self.args):
            where = f"case {self.case_id}: argument {i}"
            if a.alias_of is not None:
                j = a.alias_of
                if not 0 <= j < len(self.args) or j == i:
                    raise ValueError(f"{where}: alias_of {j} is not another argument")
                if self.args[j].alias_of is not None:
                    raise ValueError(f"{where}: alias_of {j}, which is itself an alias")
                if a.data is not None:
                    raise ValueError(f"{where}: an alias takes its data from argument {j}")
            elif a.role != "out" and a.data is None:
                raise ValueError(f"{where}: role {a.role} needs data")
            elif a.role == "out" and a.data is not None:
                raise ValueError(f"{where}: role out carries no data")


@dataclass(frozen=True)
class CaseResult:
    """Verdict of one case: ``status`` is ok, abi, canary or inmod; ``reason``
    the words after it (register names, or the argument index); ``outputs``
    maps each out/inout argument index to the values it held after the call."""

    case_id: str
    status: str
    reason: str
    outputs: dict[int, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK


@dataclass(frozen=True)
class BenchResult:
    """Ticks per call (TSC ticks, not core cycles) of one timed case."""

    case_id: str
    symbol: str
    median_ticks: float
    min_ticks: float
    batches: int
    calls_per_batch: int



# ---------------------------------------------------------------------------
# vector files and program runs


def _symbol_token(case: Case) -> str:
    return case.symbol if case.lib == 0 else f"{case.lib}:{case.symbol}"


def write_vectors(path: Path, cases: Iterable[Case]) -> None:
    """Writes ``cases`` in the vector-file format of ``harness/vectors.h``."""
    lines: list[str] = []
    seen: set[str] = set()
    for c in cases:
        if c.case_id in seen:
            raise ValueError(f"duplicate case id {c.case_id!r}")
        seen.add(c.case_id)
        lines.append(f"case {c.case_id} {_symbol_token(c)} {len(c.args)}")
        for a in c.args:
            lines.append(f"arg {a.role} {a.elem_bytes} {a.count} {a.align}")
            if a.data is not None:
                lines.append("data " + " ".join(map(str, a.data)))
        for i, a in enumerate(c.args):
            if a.alias_of is not None:
                lines.append(f"alias {i} {a.alias_of}")
        lines.append("end")
    Path(path).write_text("\n".join(lines) + "\n")


def check_libs(libs: Path | Sequence[Path]) -> list[Path]:
    paths = [Path(libs)] if isinstance(libs, (str, os.PathLike)) else [Path(p) for p in libs]
    if not paths:
        raise HarnessError("no shared object given")
    for p in paths:
        if not p.is_file():
            raise HarnessError(f"shared object {p} does not exist")
    return [p.resolve() for p in paths]


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def parse_runner_output(text: str, cases: Sequence[Case]) -> list[CaseResult]:
    """The runner's verdicts and outputs, each output element as its argument
    reads it (the runner prints elements signed; unsigned arguments are masked back)."""
    args = {c.case_id: c.args for c in cases}
    results: list[CaseResult] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "case" and len(words) >= 3:
            results.append(CaseResult(words[1], words[2], " ".join(words[3:]), {}))
        elif words[0] == "out" and len(words) >= 2 and results:
            i, values = int(words[1]), [int(v) for v in words[2:]]
            given = args.get(results[-1].case_id, ())
            if i < len(given) and given[i].unsigned:
                values = [v & ((1 << (8 * given[i].elem_bytes)) - 1) for v in values]
            results[-1].outputs[i] = values
        else:
            raise HarnessError(f"runner output line {lineno} not understood: {line[:80]!r}")
    return results


def run_runner(
    lib: Path | Sequence[Path],
    cases: Sequence[Case],
    *,
    workdir: Path | None = None,
    seed: int | None = None,
    timeout: float = 300.0,
) -> list[CaseResult]:
    """Runs ``cases`` once each through ``kg_runner`` and returns their
    verdicts in order. ``lib`` is one shared object or a list (``Case.lib``
    indexes it). ``workdir`` holds the runner build (default: the first
    library's directory); ``seed`` fixes canaries and register seeds.
    A crash of a kernel raises KernelFault naming the case."""
    libs = check_libs(lib)
    runner = build_runner(Path(workdir) if workdir is not None else libs[0].parent)
    env = dict(os.environ)
    if seed is not None:
        env["KG_SEED"] = str(seed)
    else:
        env.pop("KG_SEED", None)
    with tempfile.TemporaryDirectory(prefix="kg-run-") as tmp_s:
        tmp = Path(tmp_s)
        vec, out = tmp / "vectors.txt", tmp / "output.txt"
        write_vectors(vec, cases)
        argv = [str(runner), *map(str, libs), str(vec), str(out)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"kg_runner timed out after {timeout} s") from exc
        text = out.read_text() if out.exists() else ""
    results = parse_runner_output(text, cases)
    if proc.returncode != 0:
        detail = proc.stderr.strip()
        if proc.returncode < 0 and len(results) < len(cases):
            # output is flushed per case: the first case without a verdict crashed
            crashed = cases[len(results)]
            raise KernelFault(f"kg_runner {describe_exit(proc.returncode)} while running case "
                              f"{crashed.case_id!r} ({crashed.symbol}) {detail}".strip())
        raise HarnessError(f"kg_runner {describe_exit(proc.returncode)}: {detail.strip()}")
    ids = [r.case_id for r in results]
    if ids != [c.case_id for c in cases]:
        raise HarnessError("kg_runner output does not list the cases given")
    return results


def run_bench(
    libs: Path | Sequence[Path],
    cases: Sequence[Case],
    batches: int = 101,
    *,
    workdir: Path | None = None,
    min_ticks: int = 2000,
    warmup_ticks: int = 2_000_000,
    calls_per_batch: int | None = None,
    timeout: float = 600.0,
) -> list[BenchResult]:
    """Times ``cases`` with ``kg_bench``, all interleaved in one run (one
    batch of each case per round), so ratios between them share the machine's
    noise. ``Case.lib`` indexes ``libs``. Returns one result per case."""
    paths = check_libs(libs)
    bench = build_bench(Path(workdir) if workdir is not None else paths[0].parent)
    if batches < 1:
        raise ValueError("batches must be at least 1")
    opts = ["-b", str(batches), "-t", str(min_ticks), "-w", str(warmup_ticks)]
    if calls_per_batch is not None:
        opts += ["-k", str(calls_per_batch)]
    with tempfile.TemporaryDirectory(prefix="kg-bench-") as tmp_s:
        vec = Path(tmp_s) / "vectors.txt"
        write_vectors(vec, cases)
        argv = [str(bench), *opts, "-v", str(vec), *map(str, paths)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"kg_bench timed out after {timeout} s") from exc
    if proc.returncode != 0:
        raise HarnessError(f"kg_bench {describe_exit(proc.returncode)}: {proc.stderr.strip()}")
    results: list[BenchResult] = []
    for line in proc.stdout.splitlines():
        w = line.split()
        if not w or w[0].startswith("#"):
            continue
        if w[0] != "bench" or len(w) != 7:
            raise HarnessError(f"kg_bench output not understood: {line[:80]!r}")
        results.append(BenchResult(w[1], w[2], float(w[3]), float(w[4]), int(w[5]), int(w[6])))
    if [r.case_id for r in results] != [c.case_id for c in cases]:
        raise HarnessError("kg_bench output does not list the cases given")
    return results


def run_batch(lib: Path, symbol: str, args: Sequence[dict], dtype: str, inputs: dict[int, "np.ndarray"],
              workdir: Path, seed: int | None = None, timeout: float = 600.0) -> dict[int, "np.ndarray"]:
    """Calls `symbol` once per row of the input arrays, through the checked
    call, with binary input and output (``harness/batch.c``).

    `args` are the function's manifest argument entries; `inputs` maps every
    in/inout argument index to an array of shape (records, count). Returns the
    out/inout arguments after each call, by index, in the same shape. A call
    that breaks the ABI or its buffers, or crashes, raises KernelFault naming
    the record."""
    import numpy as np

    kind = batch_type(dtype)
    records = len(next(iter(inputs.values())))
    words = [f"{a['role']}:{kind.itemsize}:{a['count']}:{a['align']}" for a in args]
    batch = build_batch(Path(workdir))
    env = dict(os.environ)
    env.pop("KG_SEED", None)
    if seed is not None:
        env["KG_SEED"] = str(seed)
    with tempfile.TemporaryDirectory(prefix="kg-batch-") as tmp_s:
        tmp = Path(tmp_s)
        parts = [batch_rows(inputs[i], kind, records, a["count"]) for i, a in enumerate(args) if a["role"] != "out"]
        np.concatenate(parts, axis=1).tofile(tmp / "in.bin")
        argv = [str(batch), str(Path(lib).resolve()), symbol, str(records), str(tmp / "in.bin"), str(tmp / "out.bin"),
                *words]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"kg_batch timed out after {timeout} s") from exc
        if proc.returncode == BATCH_FAULT_STATUS or proc.returncode < 0:
            raise KernelFault(f"{symbol} under the checked call: {_batch_fault(proc.stdout, proc.returncode)}")
        if proc.returncode != 0:
            raise HarnessError(f"kg_batch {describe_exit(proc.returncode)} on {symbol}: "
                               f"{(proc.stdout + proc.stderr).strip()}")
        raw = np.fromfile(tmp / "out.bin", dtype=kind)
    outs = [i for i, a in enumerate(args) if a["role"] != "in"]
    widths = [args[i]["count"] for i in outs]
    rows = raw.reshape(records, sum(widths))
    result, at = {}, 0
    for i, w in zip(outs, widths):
        result[i] = batch_output(rows[:, at:at + w])
        at += w
    return result


def batch_type(dtype: str) -> "np.dtype":
    """The binary records' element type for a manifest `dtype`: its own, but 64-bit elements unsigned."""
    import numpy as np

    width = element_bytes(dtype)
    return np.dtype(f"<{'u' if dtype.startswith('u') or width == 8 else 'i'}{width}")


def batch_rows(values, kind: "np.dtype", records: int, count: int) -> "np.ndarray":
    """A batch's input rows of one argument as `kind` (`batch_type`), each value cut to its width."""
    import numpy as np

    return np.asarray(values).astype(kind, casting="unsafe").reshape(records, count)


def batch_output(rows: "np.ndarray") -> "np.ndarray":
    """Output rows as `run_batch` returns them: int64, but 64-bit elements as they are (uint64)."""
    import numpy as np

    return rows.astype(np.int64) if rows.dtype.itemsize < 8 else rows


def _batch_fault(stdout: str, code: int) -> str:
    """kg_batch's report of a broken call ("record K abi|canary|inmod DETAILS") in words."""
    words = stdout.split()
    if code < 0 or len(words) < 3 or words[0] != "record":
        return f"kg_batch {describe_exit(code)} {stdout.strip()}".strip()
    what = {"abi": "breaks the ABI:", "canary": "writes outside argument", "inmod": "modifies its input argument"}
    return f"call {words[1]} {what.get(words[2], words[2])} {' '.join(words[3:])}".strip()


def element_bytes(dtype: str) -> int:
    """Bytes of a manifest `dtype` (int16, uint64, ...)."""
    return int("".join(c for c in dtype if c.isdigit())) // 8


def manifest_arg(arg: dict, dtype: str, data: Iterable[int] | None = None, alias_of: int | None = None,
                 fastest: bool = False) -> Arg:
    """A harness argument for one entry of a manifest function's `args`, placed
    at exactly its required alignment (tests), or at its preferred one (`fastest`: timing)."""
    align = arg.get("preferred_align", arg["align"]) if fastest else arg["align"]
    return Arg(arg["role"], element_bytes(dtype), arg["count"], align, None if data is None else tuple(data), alias_of,
               dtype.startswith("u"))
