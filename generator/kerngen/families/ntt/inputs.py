"""What the NTT checks feed the kernels: the manifest's functions by kind and
ISA, harness arguments from their manifest entries, and inputs at the edges
of each input contract.

Every ISA's kernels are checked alike: the functions of one kind get the same
inputs whichever ISA they are for, and whichever ISA comes first in the bundle.
"""

from __future__ import annotations

import random

from ...harness import protocol
from ...harness.protocol import Arg, manifest_arg


def isas(manifest: dict) -> list[str]:
    """The bundle's ISAs, in manifest order (each has a full set of kernels)."""
    return list(dict.fromkeys(f["isa"] for f in manifest["functions"]))


def function(manifest: dict, kind: str, isa: str | None = None) -> dict:
    """A function's manifest entry (of `isa`, or the first of its kind): the
    checks judge kernels by what the manifest promises."""
    for f in manifest["functions"]:
        if f["kind"] == kind and isa in (None, f["isa"]):
            return f
    raise KeyError(kind)


def inputs_rng(seed: int, fn: dict) -> random.Random:
    """The random source of one function's inputs, keyed by what the function
    is, not by its ISA: each ISA's twin gets the same inputs."""
    return random.Random(f"{seed}:{fn['symbol'].removesuffix('_' + fn['isa'])}")


def harness_args(fn: dict, *data, alias: dict[int, int] | None = None, fastest: bool = False) -> tuple[Arg, ...]:
    """Harness arguments for `fn`: `data` for its in/inout arguments in order;
    `alias` maps an argument to the one whose buffer it shares; `fastest`
    places buffers at their preferred alignment (for timing)."""
    alias = alias or {}
    values = iter(data)
    out = []
    for i, a in enumerate(fn["args"]):
        if i in alias:
            out.append(manifest_arg(a, fn["dtype"], alias_of=alias[i], fastest=fastest))
        else:
            out.append(manifest_arg(a, fn["dtype"], None if a["role"] == "out" else next(values), fastest=fastest))
    return tuple(out)


# how far below the maximum (above the minimum) the near-edge inputs reach
NEAR = 8


def edge_inputs(lo: int, hi: int, n: int, rng: random.Random, randoms: int) -> list[tuple[str, list[int]]]:
    """Named inputs of n elements in [lo, hi]: all at the maximum, all at the
    minimum, each element near the maximum (or minimum), alternating extremes
    both ways, then `randoms` uniform ones. Near-edge values catch what
    the extremes alone pass: a quotient estimate off by one, a conditional
    subtraction missing, where the lanes hold the largest values but not the
    same one."""
    near = min(NEAR, hi - lo)
    out = [("max", [hi] * n), ("min", [lo] * n),
           ("near-max", [hi - rng.randint(0, near) for _ in range(n)]),
           ("near-min", [lo + rng.randint(0, near) for _ in range(n)]),
           ("alternating", [hi if i % 2 else lo for i in range(n)]),
           ("alternating2", [lo if i % 2 else hi for i in range(n)])]
    out += [(f"random{k}", [rng.randint(lo, hi) for _ in range(n)]) for k in range(randoms)]
    return out


def requires(fn: dict, name: str) -> list[int]:
    """The bound argument `name` requires: the function's shared input bound, or its own."""
    arg = next(a for a in fn["args"] if a["name"] == name)
    return (arg.get("requires") or fn["input"])["bound"]


def shoup_quotient(w: int, q: int, bits: int) -> int:
    """w' = floor(w*2^bits/q), what Shoup's kernels take beside w."""
    return (w << bits) // q


def element_bits(fn: dict) -> int:
    return 8 * protocol.element_bytes(fn["dtype"])


def outside(vals: list[int], bound: list[int]) -> str | None:
    """What breaks the output bound, if anything."""
    for i, v in enumerate(vals):
        if not bound[0] <= v <= bound[1]:
            return f"element {i} = {v} is outside the output bound {bound}"
    return None
