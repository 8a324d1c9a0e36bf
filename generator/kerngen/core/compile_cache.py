"""The generator's state between calls, in two kinds, both reachable from here.

`CompileCache`: kernels compiled by one build, by everything the passes
read, so a kernel asked for again (the same bundle emitted for System V on
ELF and on Mach-O, a mutant's untouched kernels, a test building a set a
second time) is taken from it. Whoever drives a build (a family's build, a
command, a test session) creates one and passes it down to the pipeline's
`compile_kernel`; nothing is kept in a module. It is bounded (the least
recently used kernel goes first), counts its hits and misses, and
`clear()` empties it. A cache made `through` a pass (by its name in
`passes.pipeline.PASSES`) compiles its kernels only that far: a dry build,
which finds in seconds what the passes up to there refuse (legalisation:
a form the target cannot encode) where a whole build of a large set takes
minutes; its kernels are unverified, so nothing is emitted from them.

While a cache compiles (`compiling()`), Python's cycle collector is paused:
the passes, builders and renderer make millions of small objects and no
reference cycles to speak of, and the collector, triggered by their number,
walked them all again and again (a third of an n = 4096 NTT's emission).
Reference counting frees them as before.

`memo(maxsize)`: the bounded functools caches of pure functions, whose
results are facts about their arguments alone (a lemma proved, a reducer
found, a reduction schedule, a design derived from frozen parameters, the
matrix of a squaring): keeping them across builds changes no output, only
time. Each is registered here by its qualified name; `memo_statistics()`
reports them (a `CompileCache`'s `statistics()` too, beside its own) and
`clear_memos()` empties them all.
"""

from __future__ import annotations

import functools
import gc
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["CacheStatistics", "CompileCache", "clear_memos", "memo", "memo_statistics"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class CacheStatistics:
    """One cache's counts: `capacity` is the most it keeps."""

    name: str
    hits: int
    misses: int
    size: int
    capacity: int


class CompileCache:
    """Compiled kernels by key, the `capacity` most recently used kept."""

    NAME = "compiled kernels"

    def __init__(self, capacity: int = 64, through: str | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"a compile cache keeps at least one kernel, not {capacity}")
        self.capacity = capacity
        self.through = through  # the last pass its kernels are compiled through (None: every pass)
        self._kept: OrderedDict[Hashable, Any] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        """The value kept under `key` (now the most recently used), or None; counted as a hit or a miss."""
        value = self._kept.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._kept.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self._kept[key] = value
        self._kept.move_to_end(key)
        if len(self._kept) > self.capacity:
            self._kept.popitem(last=False)

    @property
    def size(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        """Empty the cache and start its counts again (the memos are left: `clear_memos`)."""
        self._kept.clear()
        self.hits = self.misses = 0

    def statistics(self) -> tuple[CacheStatistics, ...]:
        """This cache's counts, then every registered memo's."""
        return (CacheStatistics(self.NAME, self.hits, self.misses, self.size, self.capacity), *memo_statistics())

    @contextmanager
    def compiling(self) -> Iterator[None]:
        """Compile (or build and render) with the cycle collector paused; nested uses keep it paused
        until the outermost ends."""
        was = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if was:
                gc.enable()


_MEMOS: dict[str, Any] = {}  # qualified name -> the functools cache wrapping that function


def memo(maxsize: int) -> Callable[[F], F]:
    """`functools.lru_cache(maxsize)`, registered. For pure functions of hashable arguments only."""
    def wrap(function: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(function)
        _MEMOS[f"{function.__module__}.{function.__qualname__}"] = cached
        return cached  # type: ignore[return-value]
    return wrap


def memo_statistics() -> tuple[CacheStatistics, ...]:
    stats = []
    for name, cached in sorted(_MEMOS.items()):
        info = cached.cache_info()
        stats.append(CacheStatistics(name, info.hits, info.misses, info.currsize, info.maxsize))
    return tuple(stats)


def clear_memos() -> None:
    for cached in _MEMOS.values():
        cached.cache_clear()
