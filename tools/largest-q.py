"""The README's table of the largest usable q per n and lane width for a full
NTT (log2 n layers, blocks of degree 1): for each, the primes q = 1 mod 2n
below the lane's cap, largest first, each validated as `kerngen check`
validates a parameter file (the default ISA, policy and layers, every output
lazy), until one is accepted. Run from the repository:
    .venv/bin/python tools/largest-q.py
"""

from __future__ import annotations

import sys

import sympy

from kerngen.errors import ParamError
from kerngen.families import from_mapping

DEGREES = (32, 64, 128, 256, 512, 1024, 2048, 4096)
CAPS = {16: 1 << 15, 32: 1 << 31, 64: 1 << 62}  # no q at or above these fits the lanes' values


def largest(n: int, width: int) -> int | None:
    """The largest q accepted with log2 n layers (2n | q - 1: the negacyclic ring's 2n-th roots)."""
    step = 2 * n
    q = (CAPS[width] - 2) // step * step + 1
    while q > step:
        if sympy.isprime(q):
            try:
                from_mapping({"name": "t", "family": "ntt", "n": n, "q": q, "width": width,
                              "layers": n.bit_length() - 1}, "largest-q")
                return q
            except ParamError:
                pass
        q -= step
    return None


def main() -> int:
    print("| width | " + " | ".join(str(n) for n in DEGREES) + " |")
    print("|---|" + "---|" * len(DEGREES))
    for width in CAPS:
        cells = []
        for n in DEGREES:
            found = largest(n, width)
            cells.append(str(found) if found else "none")
            print(f"  {width}-bit n = {n}: {cells[-1]}", file=sys.stderr)
        print(f"| {width}-bit | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
