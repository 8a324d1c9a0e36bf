"""kerngen as a Python library: a bundle's kernels called on numpy arrays.

`load` reads an emitted bundle (its manifest and .asm), `build` emits one
from parameters into the user's cache first, and `explore` returns the rows
`kerngen explore --json` prints. Each is imported on first call, so
`import kerngen` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from .bundle import LoadedBundle

__all__ = ["build", "explore", "load"]


def load(path: str | Path, isa: str | None = None) -> LoadedBundle:
    """The bundle at `path` (its directory or manifest.json), its kernels of
    `isa` (default: the first ISA of the dispatch order this CPU runs) as
    attributes: `b.ntt_forward(a)`, `b.basemul(r, a, b)`, ..."""
    from .bundle import load_bundle
    return load_bundle(path, isa)


def build(params: Any, isa: str | None = None) -> LoadedBundle:
    """The bundle of `params` (a TOML path, a shipped set's name or a dict of
    its keys), emitted into the cache unless it is there already, loaded."""
    from .front import build_bundle
    return build_bundle(params, isa)


def explore(params: Any, batches: int = 5, isa: str | None = None) -> list[dict]:
    """One row per reduction schedule of an NTT parameter set, as
    `kerngen explore --json` prints them (ready for pandas.DataFrame)."""
    from .front import explore_rows
    return explore_rows(params, batches, isa)
