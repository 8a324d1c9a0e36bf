"""`kerngen.build` and `kerngen.explore`: parameters (a TOML path, a shipped
set's name or a dict of its keys) to a loaded bundle, or to explore's rows."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ..core.manifest import MANIFEST
from ..core.params import Overrides
from ..emission.files import write
from ..emission.render import render
from ..errors import ParamError
from ..families import family_of, for_abi, from_mapping, load
from ..store import Store
from .bundle import HOST_ABI, LoadedBundle, load_bundle, shipped_params
from .cache import BUILD_LOCK, cache_dir


def parameters(given: Any, caller: str, isa: str | None = None) -> Any:
    """The parameters `given` to `caller` (kerngen.build, ...) name: a dict
    of a parameter file's keys, a TOML file, or a shipped set's name (kyber-3329)."""
    overrides = Overrides(isa=isa)
    if isinstance(given, dict):
        return from_mapping(given, "<dict>", overrides)
    if not isinstance(given, (str, os.PathLike)):
        raise TypeError(f"{caller}: takes a parameter file (a str or a path), a shipped set's name (kyber-3329) or a "
                        f"dict of a parameter file's keys, got {type(given).__name__} {given!r}")
    path = Path(given)
    if path.is_file():
        return load(path, overrides)
    shipped = shipped_params(given)
    if shipped is not None:
        return load(shipped, overrides)
    raise ValueError(f"{caller}: {os.fspath(given)}: neither a parameter file nor a shipped set's name (`kerngen "
                     "list` names them)")


def build_bundle(given: Any, isa: str | None = None) -> LoadedBundle:
    """Built through the store (kerngen.store) and rendered once into the
    cache, by the store's key: the same parameters and kerngen load at once."""
    p = parameters(given, "kerngen.build")
    if HOST_ABI not in p.abis:
        raise ParamError(p.source or "<dict>", "abi", f"the library calls kernels of the {HOST_ABI} calling "
                         f"convention; add {HOST_ABI!r} to abi")
    p = for_abi(p, HOST_ABI)
    store = Store.default()
    directory = cache_dir() / "bundles" / store.path(p).stem / p.name
    with BUILD_LOCK:
        if not (directory / MANIFEST).is_file():
            bundle = store.bundle(p)
            directory.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=directory.parent) as tmp:
                write(render(bundle, f"kerngen emit {p.source or p.name}"), Path(tmp) / "b")
                try:
                    os.replace(Path(tmp) / "b", directory)
                except OSError:  # another process rendered it meanwhile: the same files
                    pass
    return load_bundle(directory, isa)


def explore_rows(given: Any, batches: int = 5, isa: str | None = None) -> list[dict]:
    p = parameters(given, "kerngen.explore", isa)
    explorer = family_of(p).explorer
    if explorer is None:
        raise ValueError(f"{p.name}: explore compares NTT reduction schedules; this is a {p.family} set")
    rows, _ = explorer.explore(p, batches, None, lambda message: None)
    return rows
