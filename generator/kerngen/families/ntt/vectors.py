"""What every NTT kernel builder does with its arrays: the memory operand of
one vector of an array argument, its load and its store, and the merging of
independent blocks' instructions (`interleaved`)."""

from __future__ import annotations

from ...ir.instr import ArgBase, Builder, Imm, Mem, VReg
from ...machine.ops import sized_load, sized_store, spec
from .layout import NttLayout


def array_vector(layout: NttLayout, v: int, arg: int = 0) -> Mem:
    """Vector `v` of array argument `arg`: exactly its bytes."""
    size = layout.vector_bytes
    return Mem(ArgBase(arg), size * v, size)


def load_vector(b: Builder, m: Mem) -> VReg:
    return b.op(sized_load(m.size), m)


def store_vector(b: Builder, m: Mem, x: VReg) -> None:
    """A store of exactly the vector; a one-element vector is element 0 of the register."""
    op = sized_store(m.size)
    if spec(op).slots[-1].kind == "i":
        b.emit(op, m, x, Imm(0))
    else:
        b.emit(op, m, x)


def interleaved(b: Builder, emitters) -> None:
    """Each emitter's instructions, merged round-robin: independent blocks'
    dependency chains (loads, three multiplications deep, then the zeta's)
    overlap inside the core's scheduler window, which one block's chain
    alone leaves idle. The blocks touch disjoint memory, so the order
    between them is free even when the output aliases an input."""
    start = len(b.instrs)
    slices = []
    for emit in emitters:
        first = len(b.instrs)
        emit()
        slices.append(b.instrs[first:])
    del b.instrs[start:]
    for k in range(max(map(len, slices))):
        b.instrs.extend(sl[k] for sl in slices if k < len(sl))
