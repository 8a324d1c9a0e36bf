"""`kerngen test`: emit, assemble, run every check through the C harness and
judge the outputs against SymPy."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import emit, harness
from .families import build, checks_module
from .params import Params


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: int
    failed: int
    failures: tuple[str, ...]


def bundle_library(p: Params, workdir: Path):
    """Build, render and assemble one parameter set; returns (bundle, shared object)."""
    bundle = build(p)
    files = emit.render(bundle, f"kerngen emit {p.source}")
    out = workdir / p.name
    emit.write(files, out)
    return bundle, harness.assemble_shared(out / f"{p.name}.asm", workdir)


def test_params(p: Params, seed: int, say: Callable[[str], None]) -> Outcome:
    failures: list[str] = []
    passed = 0
    with tempfile.TemporaryDirectory(prefix="kerngen-test-") as tmp:
        work = Path(tmp)
        bundle, lib = bundle_library(p, work)
        say(f"{p.name}: emitted, verified and assembled {len(bundle.functions)} kernels")
        module = checks_module(p.family)

        def run(cases):
            return harness.run_runner(lib, cases, workdir=work, seed=seed)

        checks = module.checks(bundle, seed)
        results = run([c.case for c in checks])
        for c, r in zip(checks, results):
            msg = f"{r.status} {r.reason}".strip() if r.status != "ok" else c.judge(r.outputs)
            if msg:
                failures.append(f"{p.name}: {c.case.case_id} ({c.case.symbol}): {msg}")
            else:
                passed += 1
        for name, msg in module.round_trips(bundle, run, seed) if hasattr(module, "round_trips") else ():
            if msg:
                failures.append(f"{p.name}: {name}: {msg}")
            else:
                passed += 1
        if hasattr(module, "layout_check"):
            msg = module.layout_check(bundle)
            if msg:
                failures.append(f"{p.name}: manifest layout: {msg}")
            else:
                passed += 1
    say(f"{p.name}: {passed} passed, {len(failures)} failed")
    return Outcome(p.name, passed, len(failures), tuple(failures))
