"""kerngen: parameter sets in, fully unrolled and verified x86-64 kernels out."""

__version__ = "0.2.0"
LICENSE = "MIT OR Apache-2.0"  # kerngen's, and that of every file it generates (SPDX expression)
