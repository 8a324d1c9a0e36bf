"""Lane movement: the `Move` rows of the instruction table applied to lists of lanes.

A register holding `lane_bits`-wide data is a list with one entry per lane:
an interval for the verifier, a coefficient index for the NTT layout
planner, anything else for a caller. `move_lanes` runs one instruction's
movement on such lists. When the instruction moves units wider than a lane,
lanes travel in groups; when it moves narrower units (bytes, say), each
lane is cut into parts, and a destination lane is whole again only if its
parts are, in order, all the parts of one source lane (else it is `SPLIT`).
"""

from __future__ import annotations

from typing import Any

from ..machine.ops import Op


class _Split:
    def __repr__(self) -> str:
        return "SPLIT"


SPLIT = _Split()  # a destination lane assembled from parts of different lanes
_ZERO = None  # a zero unit in a route


def move_lanes(op: Op, sources: list[list[Any]], imm: int | None, lane_bits: int, dest_lanes: int,
               zero: Any) -> list[Any] | None:
    """The destination lanes of `op` (which must have a `move`) for `sources`
    (lists of lanes, in the instruction's source order); `zero` stands for a
    lane of zeros, in the sources and in the result. None when this
    immediate makes the instruction no movement (a shift by a part of a byte)."""
    mv = op.move
    unit = mv.unit or lane_bits
    if unit >= lane_bits:
        per = unit // lane_bits
        grouped = [[src[k:k + per] for k in range(0, len(src) - per + 1, per)] for src in sources]
        route = mv.route(dest_lanes // per, tuple(len(g) for g in grouped), imm, unit)
        if route is None:
            return None
        out: list[Any] = []
        for r in route:
            out += list(grouped[r[0]][r[1]]) if r is not _ZERO else [zero] * per
        return out
    parts = lane_bits // unit
    cut = [[(s, lane, p) for lane in range(len(src)) for p in range(parts)] for s, src in enumerate(sources)]
    route = mv.route(dest_lanes * parts, tuple(len(c) for c in cut), imm, unit)
    if route is None:
        return None
    units = [cut[r[0]][r[1]] if r is not _ZERO else _ZERO for r in route]
    out = []
    for k in range(dest_lanes):
        chunk = units[k * parts:(k + 1) * parts]
        if all(c is _ZERO for c in chunk):
            out.append(zero)
            continue
        first = chunk[0]
        whole = first is not _ZERO and all(c is not _ZERO and c[:2] == first[:2] and c[2] == i
                                           for i, c in enumerate(chunk))
        if not whole:
            out.append(SPLIT)
            continue
        value = sources[first[0]][first[1]]
        out.append(value)
    return out
