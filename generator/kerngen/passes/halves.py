"""Halves of loaded vectors taken from memory.

A lane move whose destination's two 256-bit halves are each a whole half of
a zmm vector loaded from an argument (`vshufi64x2` of two loaded vectors, as
an avx512 NTT's first lane move regroups the halves of the narrower ISAs'
order) costs a cross-half shuffle after its loads: five cycles of latency
on AMD Zen 5, on the path of a call that waits for the previous call's
stores. The same register is a ymm load of one half and a `vinserti64x4`
of the other from memory (`ops.LOAD_HALVES`), which start at the loads.
"""

from __future__ import annotations

from bisect import bisect_right

from ..ir.instr import ArgBase, Imm, Instr, Mem, VReg
from ..ir.lanes import move_lanes
from ..machine.encoding import Encoding
from ..machine.ops import LOAD_HALVES, spec

_ZMM = 512
_HALF_BYTES = 32


def _halves_moved(ins: Instr) -> list[tuple[VReg, int]] | None:
    """(source, its half) for each 256-bit half of a zmm destination, where `ins` moves whole halves of
    vector registers into both (unmasked); else None."""
    s = spec(ins.op)
    dst = ins.operands[0]
    if s.move is None or s.masking is not None or not isinstance(dst, VReg) or dst.bits != _ZMM:
        return None
    sources = [op for op in ins.read if not isinstance(op, Imm)]
    if not all(isinstance(op, VReg) and op.bits == _ZMM for op in sources):
        return None
    imm = next((op.value for op in ins.read if isinstance(op, Imm)), None)
    labels = [[(n, b) for b in range(_ZMM // 8)] for n in range(len(sources))]
    moved = move_lanes(s, labels, imm, 8, _ZMM // 8, None)
    if moved is None:
        return None
    out = []
    for half in (0, 1):
        part = moved[half * _HALF_BYTES:(half + 1) * _HALF_BYTES]
        if any(p is None or not isinstance(p, tuple) for p in part):
            return None
        (n, first) = part[0]
        if first % _HALF_BYTES or part != [(n, first + k) for k in range(_HALF_BYTES)]:
            return None
        out.append((sources[n], first // _HALF_BYTES))
    return out


def load_halves(body: list[Instr], encoding: Encoding) -> list[Instr]:
    """Every move of whole halves of argument vectors loaded whole, with no store between a load and the
    move, as `LOAD_HALVES` from the memory they were loaded from, where every reader of those loads is
    such a move (so the loads go)."""
    if not spec(LOAD_HALVES).form_exists(encoding, _ZMM):
        return body
    loaded = {ins.operands[0]: (i, ins.operands[1]) for i, ins in enumerate(body)
              if ins.op == "load" and isinstance(ins.operands[1], Mem) and isinstance(ins.operands[1].base, ArgBase)
              and isinstance(ins.operands[0], VReg) and ins.operands[0].bits == _ZMM}
    stores = [i for i, ins in enumerate(body) if any(isinstance(op, Mem) for op in ins.written)]
    readers: dict[VReg, list[int]] = {}
    for j, ins in enumerate(body):
        for op in ins.read:
            if op in loaded:
                readers.setdefault(op, []).append(j)
    rewritten: dict[int, Instr] = {}
    for j, ins in enumerate(body):
        halves = _halves_moved(ins)
        if halves is None or not all(src in loaded for src, _ in halves):
            continue
        if any(bisect_right(stores, j) > bisect_right(stores, loaded[src][0]) for src, _ in halves):
            continue  # a store between the load and the move: memory may no longer hold the register
        mems = [Mem(loaded[src][1].base, loaded[src][1].offset + half * _HALF_BYTES, _HALF_BYTES)
                for src, half in halves]
        rewritten[j] = Instr(LOAD_HALVES, (ins.operands[0], *mems), ins.comment)
    sources = {j: {src for src, _ in _halves_moved(body[j])} for j in rewritten}
    while True:  # a load goes where all its readers are rewritten; a move is rewritten where its loads go
        gone = {v for v, js in readers.items() if all(j in rewritten for j in js)}
        kept = {j: ins for j, ins in rewritten.items() if sources[j] <= gone}
        if len(kept) == len(rewritten):
            break
        rewritten = kept
    dropped = {loaded[v][0] for v in gone}
    return [rewritten.get(j, ins) for j, ins in enumerate(body) if j not in dropped]
