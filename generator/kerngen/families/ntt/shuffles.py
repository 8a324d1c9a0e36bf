"""The in-register lane moves of the NTT layout, as instructions.

A `Swap` exchanges a lane bit with a register-pair bit; an `Interleave`
interleaves the elements of a register pair. Each is a short recipe of
instruction-table opcodes, chosen by the distance the lanes travel:

    128 bits        permute 128-bit halves (vperm2i128 0x20 / 0x31)
     64 bits        interleave 64-bit units (vpunpck[lh]qdq)
     32, 16 bits    shift inside units twice as wide, blend odd units
    interleave      interleave elements of the lane width (vpunpck[lh]wd for 16-bit lanes)

The builder emits a recipe; the layout planner runs the same recipe on
coefficient indices through the table's lane routes (`ir.lanes`), so the
order the planner predicts is the order the instructions make.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.instr import Builder, Imm, VReg
from ...ir.lanes import SPLIT, move_lanes
from ...machine.ops import by_width, spec


@dataclass(frozen=True)
class Swap:
    """Exchange lane bit `lane_bit` with slot bit `slot_bit` in every register pair."""

    lane_bit: int
    slot_bit: int


@dataclass(frozen=True)
class Interleave:
    """Element interleave of every register pair on `slot_bit`: within each
    128-bit half, the top lane bit goes to the slot bit, the lower lane bits
    move up one and the slot bit comes down to lane bit 0."""

    slot_bit: int


# a recipe line: (result name, opcode, first source, second source or None, immediate or None);
# sources "x" and "y" are the pair, results "lo" and "hi" its new contents
Recipe = tuple[tuple[str, str, str, str | None, int | None], ...]

ODD_UNITS = 0xAA


def recipe(step: Swap | Interleave, lane_bits: int) -> Recipe:
    if isinstance(step, Interleave):
        return (("lo", by_width("interleave_low", lane_bits), "x", "y", None),
                ("hi", by_width("interleave_high", lane_bits), "x", "y", None))
    distance = lane_bits << step.lane_bit
    if distance == 128:
        op = by_width("permute_halves", 128)
        return (("lo", op, "x", "y", 0x20), ("hi", op, "x", "y", 0x31))
    if distance == 64:
        return (("lo", by_width("interleave_low", 64), "x", "y", None),
                ("hi", by_width("interleave_high", 64), "x", "y", None))
    sll, srl, blend = by_width("sll", 2 * distance), by_width("srl", 2 * distance), by_width("blend", distance)
    return (("s", sll, "y", None, distance), ("lo", blend, "x", "s", ODD_UNITS),
            ("t", srl, "x", None, distance), ("hi", blend, "t", "y", ODD_UNITS))


def emit_step(b: Builder, x: VReg, y: VReg, step: Swap | Interleave, lane_bits: int) -> tuple[VReg, VReg]:
    """The lane movement of `step` on the pair (x, y), as instructions."""
    env = {"x": x, "y": y}
    for dst, op, a, c, imm in recipe(step, lane_bits):
        sources = [env[a]] + ([env[c]] if c else []) + ([Imm(imm)] if imm is not None else [])
        env[dst] = b.op(op, *sources)
    return env["lo"], env["hi"]


def simulate_step(step: Swap | Interleave, lo: list, hi: list, lane_bits: int, register_lanes: int
                  ) -> tuple[list, list]:
    """The same movement on lists of payloads (one per lane of a vector of
    len(lo) lanes, living in the low lanes of a register of `register_lanes`)."""
    lanes = len(lo)
    pad = [None] * (register_lanes - lanes)
    env = {"x": list(lo) + pad, "y": list(hi) + pad}
    for dst, op, a, c, imm in recipe(step, lane_bits):
        sources = [env[a]] + ([env[c]] if c else [])
        out = move_lanes(spec(op), sources, imm, lane_bits, register_lanes, None)
        if out is None or any(v is SPLIT for v in out):
            raise AssertionError(f"layout step {step}: {op} does not move whole lanes")
        env[dst] = out
    for name in ("lo", "hi"):
        if any(v is None for v in env[name][:lanes]) or any(v is not None for v in env[name][lanes:]):
            raise AssertionError(f"layout step {step} moves data across the vector's {lanes} lanes")
    return env["lo"][:lanes], env["hi"][:lanes]
