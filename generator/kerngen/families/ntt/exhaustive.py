"""Every input of a map of single 16-bit elements: the reductions and the
freeze, and any kernel of one 16-bit input array whose manifest proof says
each output element is a multiple of its own input element mod q (locality
"element", monomials [[a]]). Such a kernel computes one function of a lane
value in every lane, but each vector of the array by instructions of its
own (unrolled): so every input value goes through every vector, at one of
its lanes. Call r takes the values from index `step` * r on, `step` the
lanes of the narrowest vector (an xmm register's 8, or n): vector v of call
r holds indices step * r + v * lanes + j, and over the calls each vector
sees them all. Each output is judged in its bound and congruent to scale
times its input. What random inputs and a few runs of consecutive ones
miss: a conditional subtraction left out of one vector, wrong only where
the input is a multiple of q (freeze(-26632) = 3329 where q is 3329).
"""

from __future__ import annotations

import numpy as np

from ...harness import protocol
from ...machine.isa import SSE
from .inputs import element_bits

ALL_INPUTS_BITS = 16  # lanes this narrow (or narrower) are checked on every input of their contract
NARROWEST_VECTOR_BITS = SSE.vector_bits  # the fewest lanes a vector of n or more elements has: an xmm register's
BATCH_ELEMENTS = 1 << 21  # elements per batch of calls (the memory the inputs and outputs take)


def one_element_maps(manifest: dict) -> list[dict]:
    """The functions whose every input is checked: one input array of 16-bit
    elements, each output element proven a multiple of its own input's."""
    out = []
    for fn in manifest["functions"]:
        inputs = [a["name"] for a in fn["args"] if a["role"] != "out"]
        proof = fn.get("proof") or {}
        if (element_bits(fn) <= ALL_INPUTS_BITS and len(inputs) == 1 and proof.get("locality") == "element"
                and proof.get("monomials") == [inputs]):
            out.append(fn)
    return out


def every_input(fn: dict, batch) -> tuple[str, str | None]:
    """`fn` called on every value of its input contract in every vector (in
    batches of at most `BATCH_ELEMENTS`): (the check's name, None or what is
    wrong with the first element found wrong)."""
    lo, hi = fn["input"]["bound"]
    q, scale = fn["q"], fn["output"]["scale"]
    [(index, arg)] = [(i, a) for i, a in enumerate(fn["args"]) if a["role"] != "out"]
    [written] = [i for i, a in enumerate(fn["args"]) if a["role"] != "in"]
    n, total = arg["count"], hi - lo + 1
    step = min(n, NARROWEST_VECTOR_BITS // element_bits(fn))
    calls = -(-total // step)
    name = f"every input of {fn['symbol']} ({total} values through each vector, {calls} calls)"
    out_lo, out_hi = fn["output"]["bound"]
    per_batch = max(1, BATCH_ELEMENTS // n)
    for first in range(0, calls, per_batch):
        starts = step * np.arange(first, min(calls, first + per_batch), dtype=np.int64)
        rows = lo + (starts[:, None] + np.arange(n, dtype=np.int64)) % total
        try:
            got = batch(fn, {index: rows})[written].astype(np.int64)
        except protocol.KernelFault as e:
            return name, str(e)
        bad = np.argwhere((got < out_lo) | (got > out_hi) | ((got - scale * rows) % q != 0))
        if len(bad):
            x, y = int(rows[tuple(bad[0])]), int(got[tuple(bad[0])])
            where = "outside" if not out_lo <= y <= out_hi else "inside"
            return name, (f"input {x} (element {bad[0][1]}) gives {y}, {where} [{out_lo}, {out_hi}]"
                          + ("" if (y - scale * x) % q == 0 else f", not congruent to {scale} * {x} mod {q}"))
    return name, None
