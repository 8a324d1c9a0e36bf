"""Where the library keeps what it builds: shared objects of bundles, the
batch trampoline and the bundles `build` emits, under the user's cache
directory ($XDG_CACHE_HOME, else ~/.cache). Building is serialised in the
process by one lock; across processes `toolchain.cached` renames whole
products into place."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..harness import toolchain

BUILD_LOCK = threading.RLock()  # one build at a time in this process: threads share products
TRAMPOLINE = "pycall.c"


def cache_dir() -> Path:
    """kerngen/lib in $XDG_CACHE_HOME (~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kerngen" / "lib"


def shared_object(asm: Path, units: tuple[Path, ...] = ()) -> Path:
    """The bundle's .asm assembled and linked with its C units (cached by their texts' hash)."""
    with BUILD_LOCK:
        return toolchain.assemble_shared(asm, cache_dir(), units)


def trampoline() -> Path:
    """The batch loop (harness/pycall.c) as a shared object, compiled once."""
    with BUILD_LOCK:
        return toolchain.build_shared_c(TRAMPOLINE, "kg-pycall", ("-O2", "-std=c11"), cache_dir(),
                                        "compiling the batch loop")
