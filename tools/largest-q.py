"""The README's table of the largest usable q per n and lane width for a full
NTT (log2 n layers, blocks of degree 1): for each, the primes q = 1 mod 2n
below the lane's cap, largest first, each validated as `kerngen check`
validates a parameter file (the default ISA, policy and layers, every output
lazy), until one is accepted; above the cap, primes 2^w - 2^b + 1 first. Run from the repository:
    .venv/bin/python tools/largest-q.py
"""

from __future__ import annotations

import sys

import sympy

from kerngen.errors import ParamError
from kerngen.families import from_mapping

DEGREES = (32, 64, 128, 256, 512, 1024, 2048, 4096)
# no q at or above these fits the lanes' values, but primes of a special form (`special_forms`)
CAPS = {16: 1 << 15, 32: 1 << 31, 64: 1 << 62}


def accepted(n: int, q: int, width: int) -> bool:
    try:
        from_mapping({"name": "t", "family": "ntt", "n": n, "q": q, "width": width, "layers": n.bit_length() - 1},
                     "largest-q")
        return True
    except ParamError:
        return False


def special_forms(n: int, width: int):
    """Primes 2^width - 2^b + 1 above the cap with 2n | q - 1, largest first (b from log2(2n) up)."""
    for b in range((2 * n).bit_length() - 1, width):
        q = (1 << width) - (1 << b) + 1
        if q > CAPS[width] and sympy.isprime(q):
            yield q


def largest(n: int, width: int) -> int | None:
    """The largest q accepted with log2 n layers (2n | q - 1: the negacyclic ring's 2n-th roots)."""
    for q in special_forms(n, width):
        if accepted(n, q, width):
            return q
    step = 2 * n
    q = (CAPS[width] - 2) // step * step + 1
    while q > step:
        if sympy.isprime(q) and accepted(n, q, width):
            return q
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
