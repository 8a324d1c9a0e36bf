"""`kerngen emit`: build, verify and write bundles (all or nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError
from ..core.compile_cache import CompileCache
from ..core.manifest import MANIFEST, is_bundle
from ..families import build_all
from ..emission.files import check_bundle_dir, exclusive, write
from ..emission.render import render


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
        check_replaceable(target, p.name, force)
        check_bundle_dir(target, force)
    staged, cache = [], CompileCache()
    for (p, shown), target in zip(loaded, targets):
        # the output directory changes nothing in the files, so it is not part of the command
        say(f"{p.name}: building and verifying kernels")
        with cache.compiling():  # the builders' and the renderer's objects too (a tenth of n = 4096's time)
            staged.append((target, render(build_all(p, cache), f"kerngen emit {shown}{flags}")))
    with exclusive(targets):  # another emit may have written a target while these built: checked again
        for (p, _), target in zip(loaded, targets):
            check_replaceable(target, p.name, force)
        return [path for target, files in staged for path in write(files, target, force)]


def check_replaceable(target: Path, name: str, force: bool) -> None:
    """Refuse, before any work and unless `force`, to replace a bundle
    directory holding anything but the bundle of the same set as it was
    written: another set's bundle (its manifest names another set), or files
    its manifest does not list (notes a user added). Replacing the same
    set's bundle whole is what re-emitting (`make generated`) does."""
    if force or not is_bundle(target) or not target.is_dir():
        return
    again = "choose another directory, or pass --force to replace it and everything in it"
    try:
        manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
        held, listed = manifest["params"]["name"], set(manifest["files"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise UsageError(f"--out: {target} holds a {MANIFEST} that is not a kerngen manifest; {again}") from None
    if held != name:
        raise UsageError(f"--out: {target} holds the bundle of {held!r}, not of {name!r}; {again}")
    others = sorted(p.name for p in target.iterdir() if p.name not in listed | {MANIFEST})
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise UsageError(f"--out: {target} holds files its bundle's {MANIFEST} does not list ({shown}); {again}")
