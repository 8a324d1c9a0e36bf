"""`kerngen emit`: build, verify and write bundles (all or nothing)."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import UsageError
from ..families import build_all
from ..passes.pipeline import cycle_collection_paused
from ..target.files import check_bundle_dir, write
from ..target.render import render


def emit(loaded: list[tuple[object, str]], out: str | None, flags: str, force: bool, say) -> list[Path]:
    """`loaded`: (params, how the command names the file). Output paths are
    checked before any work; every bundle is built and verified before any
    file is written."""
    several = len(loaded) > 1
    targets = [Path(out) / p.name if several else Path(out or p.name) for p, _ in loaded]
    for (p, shown), target in zip(loaded, targets):
        others = [s for (q, s), t in zip(loaded, targets) if t == target and s != shown]
        if others or targets.count(target) > 1:
            raise UsageError(f"--out: {shown} and {(others or [shown])[0]} both name the bundle {target}: each "
                             "bundle needs a directory of its own (give the parameter sets different names)")
        check_bundle_dir(target, force)
    staged = []
    for (p, shown), target in zip(loaded, targets):
        # the output directory changes nothing in the files, so it is not part of the command
        say(f"{p.name}: building and verifying kernels")
        with cycle_collection_paused():  # the builders' and the renderer's objects too (a tenth of n = 4096's time)
            staged.append((target, render(build_all(p), f"kerngen emit {shown}{flags}")))
    written = []
    for target, files in staged:
        written += write(files, target, force)
    return written
