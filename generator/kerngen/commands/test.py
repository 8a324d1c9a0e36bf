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

from .. import __version__
from ..core.bundle import Bundle
from ..core.family import Calls
from ..core.manifest import asm_file, read_bundle
from ..core.params import COMMON_KEYS
from ..families import FAMILIES, family_of, from_mapping
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
        return test_bundle(Path(tmp) / p.name, seed, say, Path(tmp), reemit=False)


def fresh_emission(directory: Path, manifest: dict) -> str | None:
    """None when the bundle's files are exactly what this kerngen emits from
    the manifest's parameters (then every proof made at emission holds for
    them: overflow, congruences, consistent constant tables); else what differs."""
    family = FAMILIES[manifest["params"]["family"]]
    table = {k: v for k, v in manifest["params"].items() if k in family.keys | COMMON_KEYS}
    p = from_mapping(table, f"{directory / 'manifest.json'} (params)")
    files = render(family.build(p), manifest["command"])
    changed = [name for name, text in files.items() if (directory / name).read_text() != text]
    return None if not changed else (f"{', '.join(changed)} differ from a fresh emission of the manifest's "
                                     "parameters: the bundle was edited after kerngen wrote it")


def test_bundle(path: Path, seed: int, say: Say, workdir: Path | None = None, reemit: bool = True) -> Outcome:
    """Test the bundle in `path` (its directory or manifest) from its manifest
    alone; with `reemit`, also compare it with a fresh emission when it was
    written by this version of kerngen."""
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
    if reemit:
        version = manifest["generator"].get("version")
        if version == __version__:
            say(f"{name}: comparing with a fresh emission of its parameters")
            msg = fresh_emission(directory, manifest)
            if msg:
                failures.append(f"{name}: fresh emission: {msg}")
            else:
                passed += 1
        else:
            say(f"{name}: written by kerngen {version}, not {__version__}: no fresh emission to compare with; "
                "the checks and basis-vector proofs below still run")
    with tempfile.TemporaryDirectory(prefix="kerngen-test-") as tmp:
        work = workdir or Path(tmp)
        lib = driver.assemble_shared(asm_file(directory, manifest), work)

        def run(cases):
            return driver.run_runner(lib, cases, workdir=work, seed=seed)

        def batch(fn, inputs):
            return driver.run_batch(lib, fn["symbol"], fn["args"], fn["dtype"], inputs, work, seed=seed)

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
        for check, msg in family.chained_checks(manifest, Calls(run, batch), seed):
            if msg:
                failures.append(f"{name}: {check}: {msg}")
            else:
                passed += 1
    say(f"{name}: {passed} passed, {len(failures)} failed")
    return Outcome(name, passed, len(failures), tuple(failures))
