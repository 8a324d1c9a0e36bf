"""kerngen: parameter sets in, fully unrolled and verified x86-64 kernels out."""

from importlib import import_module

__version__ = "0.2.0"
LICENSE = "MIT OR Apache-2.0"  # kerngen's, and that of every file it generates (SPDX expression)


def __getattr__(name: str):
    """`kerngen.load`, `kerngen.build` and `kerngen.explore` (kerngen.library),
    imported on first use: `import kerngen` itself loads no numpy or passes."""
    if name in ("load", "build", "explore"):
        return getattr(import_module("kerngen.library"), name)  # by name: the package imports nothing eagerly
    raise AttributeError(f"module 'kerngen' has no attribute {name!r}")
