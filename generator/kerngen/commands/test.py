"""`kerngen test`: emit, assemble, run every check through the C harness and
judge the outputs against SymPy."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.bundle import Bundle
from ..families import family_of
from ..harness import driver
from ..target.files import write
from ..target.render import render


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: int
    failed: int
    failures: tuple[str, ...]


def bundle_library(p: Any, workdir: Path) -> tuple[Bundle, Path]:
    """Build, render and assemble one parameter set; returns (bundle, shared object)."""
    bundle = family_of(p).build(p)
    out = workdir / p.name
    write(render(bundle, f"kerngen emit {p.source}"), out)
    return bundle, driver.assemble_shared(out / f"{p.name}.asm", workdir)


def test_params(p: Any, seed: int, say: Callable[[str], None]) -> Outcome:
    family = family_of(p)
    failures: list[str] = []
    passed = 0
    with tempfile.TemporaryDirectory(prefix="kerngen-test-") as tmp:
        work = Path(tmp)
        bundle, lib = bundle_library(p, work)
        say(f"{p.name}: emitted, verified and assembled {len(bundle.functions)} kernels")

        def run(cases):
            return driver.run_runner(lib, cases, workdir=work, seed=seed)

        checks = family.checks(bundle, seed)
        results = run([c.case for c in checks])
        for c, r in zip(checks, results):
            msg = f"{r.status} {r.reason}".strip() if not r.ok else c.judge(r.outputs)
            if msg:
                failures.append(f"{p.name}: {c.case.case_id} ({c.case.symbol}): {msg}")
            else:
                passed += 1
        for name, msg in family.chained_checks(bundle, run, seed):
            if msg:
                failures.append(f"{p.name}: {name}: {msg}")
            else:
                passed += 1
    say(f"{p.name}: {passed} passed, {len(failures)} failed")
    return Outcome(p.name, passed, len(failures), tuple(failures))
