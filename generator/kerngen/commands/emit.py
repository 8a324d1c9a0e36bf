"""`kerngen emit`: build, verify and write bundles (all or nothing)."""

from __future__ import annotations

from pathlib import Path

from ..families import family_of
from ..target.files import write
from ..target.render import render


def emit(loaded: list[tuple[object, str]], out: str | None, flags: str, say) -> list[Path]:
    """`loaded`: (params, how the command names the file); every bundle is
    built and verified before any file is written."""
    several = len(loaded) > 1
    staged = []
    for p, shown in loaded:
        target = Path(out) / p.name if several else Path(out or p.name)
        # the output directory changes nothing in the files, so it is not part of the command
        say(f"{p.name}: building and verifying kernels")
        staged.append((target, render(family_of(p).build(p), f"kerngen emit {shown}{flags}")))
    written = []
    for target, files in staged:
        written += write(files, target)
    return written
