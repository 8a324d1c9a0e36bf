"""Order for general registers: each store's computation right before it.

Lowered lane by lane (`legalise`), a vector operation becomes one
instruction per lane, and the builders' order (every lane of one vector
operation, then every lane of the next) keeps all lanes of every temporary
live at once: four times a vector's registers, more than the general
registers hold, so the allocator spills. Emitting instead, store by store in
the original order, the instructions each store still needs (depth first,
in their original order) finishes a lane's chain before the next begins.

Nothing moves across what it depends on: the values it reads, memory (a
load after the last store to its address, a store after the loads and
stores of its address before it) and, for an instruction of a tagged idiom,
the idiom's instruction before it (the verifier follows an idiom from its
start).
"""

from __future__ import annotations

from ..ir.instr import GReg, Instr, Mem, Operand, VReg


def stores_first_depth(body: list[Instr]) -> list[Instr]:
    deps = _dependences(body)
    done = [False] * len(body)
    out: list[Instr] = []

    def emit(root: int) -> None:
        stack = [(root, iter(deps[root]))]
        while stack:
            i, pending = stack[-1]
            nxt = next((d for d in pending if not done[d]), None)
            if nxt is not None:
                stack.append((nxt, iter(deps[nxt])))
                continue
            stack.pop()
            if not done[i]:
                done[i] = True
                out.append(body[i])

    for i, ins in enumerate(body):
        if any(isinstance(op, Mem) for op in ins.written):
            emit(i)
    for i in range(len(body)):
        if not done[i]:
            emit(i)
    return out


def _dependences(body: list[Instr]) -> list[list[int]]:
    """For each instruction, the earlier ones it must follow, in their original order."""
    made: dict[Operand, int] = {}
    last_store: dict[tuple, int] = {}
    loads_since: dict[tuple, list[int]] = {}
    idiom_last: dict[int, int] = {}
    deps: list[list[int]] = []
    for i, ins in enumerate(body):
        d = {made[op] for op in ins.read if isinstance(op, (VReg, GReg)) and op in made}
        for op in ins.read:
            if isinstance(op, Mem):
                key = _address(op)
                if key in last_store:
                    d.add(last_store[key])
                loads_since.setdefault(key, []).append(i)
        for op in ins.written:
            if isinstance(op, Mem):
                key = _address(op)
                d.update(loads_since.pop(key, ()))
                if key in last_store:
                    d.add(last_store[key])
                last_store[key] = i
        if ins.idiom is not None:
            if ins.idiom.group in idiom_last:
                d.add(idiom_last[ins.idiom.group])
            idiom_last[ins.idiom.group] = i
        for op in ins.written:
            if isinstance(op, (VReg, GReg)):
                made[op] = i
        d.discard(i)
        deps.append(sorted(d))
    return deps


def _address(m: Mem) -> tuple:
    """Where a memory operand points: its buffer and offset (every access here is one 64-bit word)."""
    return m.buffer, m.offset
