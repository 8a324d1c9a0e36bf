"""`kerngen test`: run every check of a bundle through the C harness and judge
the outputs against independent references.

A bundle is tested from its manifest alone: `kerngen test PARAMS.toml` emits
the bundle into a temporary directory and tests that, exactly as `kerngen
test BUNDLE_DIR` tests a bundle emitted earlier or copied into another project.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.bundle import Bundle
from ..core.manifest import asm_file, read_bundle
from ..families import FAMILIES, family_of
from ..harness import driver
from ..target.files import write
from ..target.render import render

Say = Callable[[str], None]


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


def test_params(p: Any, seed: int, say: Say) -> Outcome:
    """Emit the bundle of `p` into a temporary directory and test it there."""
    with tempfile.TemporaryDirectory(prefix="kerngen-test-") as tmp:
        bundle, _ = bundle_library(p, Path(tmp))
        say(f"{p.name}: emitted, verified and assembled {len(bundle.functions)} kernels")
        return test_bundle(Path(tmp) / p.name, seed, say, Path(tmp))


def test_bundle(path: Path, seed: int, say: Say, workdir: Path | None = None) -> Outcome:
    """Test the bundle in `path` (its directory or manifest) from its manifest alone."""
    directory, manifest = read_bundle(path)
    name = manifest["params"]["name"]
    family = FAMILIES[manifest["params"]["family"]]
    host = driver.cpu_flags()
    runnable = [f for f in manifest["functions"] if set(f.get("cpu", ())) <= host]
    for f in manifest["functions"]:
        if f not in runnable:
            say(f"{name}: skipping {f['symbol']}: this CPU lacks "
                + ", ".join(sorted(set(f["cpu"]) - host)))
    manifest = {**manifest, "functions": runnable}
    failures: list[str] = []
    passed = 0
    with tempfile.TemporaryDirectory(prefix="kerngen-test-") as tmp:
        work = workdir or Path(tmp)
        lib = driver.assemble_shared(asm_file(directory, manifest), work)

        def run(cases):
            return driver.run_runner(lib, cases, workdir=work, seed=seed)

        start = time.monotonic()
        checks = family.checks(manifest, seed)
        say(f"{name}: running {len(checks)} checks of {len(runnable)} functions")
        results = run([c.case for c in checks])
        for k, (c, r) in enumerate(zip(checks, results)):
            msg = f"{r.status} {r.reason}".strip() if not r.ok else c.judge(r.outputs)
            if msg:
                failures.append(f"{name}: {c.case.case_id} ({c.case.symbol}): {msg}")
            else:
                passed += 1
            if time.monotonic() - start > 5 and k % 16 == 15:
                say(f"{name}: judged {k + 1} of {len(checks)}")
        for check, msg in family.chained_checks(manifest, run, seed):
            if msg:
                failures.append(f"{name}: {check}: {msg}")
            else:
                passed += 1
    say(f"{name}: {passed} passed, {len(failures)} failed")
    return Outcome(name, passed, len(failures), tuple(failures))
