"""kerngen: parameter sets in, fully unrolled and verified x86-64 kernels out."""

__version__ = "0.1.0"
