"""A plan run by exact modular arithmetic on numpy arrays: the oracle of the
planner's tests. Every stage runs as the C driver runs it (`plan_unit`):
tiles filled from their source, copied to a buffer where the stage says so,
calls at the plan's offsets reading the twiddles of their table rows,
permutations and spreads; the butterflies are the textbook ones, Cooley–Tukey
forward (x + w y, x - w y) and Gentleman–Sande inverse (x + y, (x - y) w),
their twiddles given by the caller."""

from __future__ import annotations

import numpy as np

from .plan import Leaf, Permute, Plan, Spread, Stage, SubPass


def call_rows(plan: Plan, stage: Stage, sub: SubPass, tile: int, k: int):
    """The rows (element offsets of their first elements) call k of `tile` takes, and how many elements of each."""
    start = stage.call_offset(sub, tile, k)
    c = sub.codelet
    if isinstance(c, Leaf):
        return [start + i * plan.columns for i in range(c.size)], plan.columns
    return [start + j * c.stride for j in range(c.repeat << c.radix_bits)], c.width


def run_stage(plan: Plan, stage: Stage, subs, arrays: list, q: int, twiddle, inverse: bool = False) -> None:
    """`subs` (the stage's sub-passes, in the order they run) on `arrays` (numpy arrays of integers in [0, q),
    the transform's arguments; the codelets' rows in the first) with exact butterflies: forward x + w*y,
    x - w*y with w = twiddle(layer, block); inverse (x + y, (x - y)*w) with the same twiddle(layer, block),
    which the caller gives inverted; a fill copies each tile's rows in first. The oracle of the planner's tests."""
    a = arrays[0]
    for sub in subs:
        if isinstance(sub.codelet, Permute):
            _permute(sub.codelet, a, arrays[1] if sub.codelet.out_of_place else a)
            return
    rows, apart, width = stage.extent
    for tile in range(stage.tiles):
        at, source = stage.tile_offset(tile), arrays[stage.fill.array] if stage.fill else a
        start = stage.fill_offset(tile)
        if stage.buffered:
            work = np.concatenate([source[start + j * apart:start + j * apart + width] for j in range(rows)])
        else:
            work = a
            if stage.fill is not None:
                for j in range(rows):
                    a[at + j * apart:at + j * apart + width] = source[start + j * apart:start + j * apart + width]
        for sub in subs:
            first, layers = sub.first, list(sub.layers)
            for k in range(sub.calls):
                if isinstance(sub.codelet, Spread):  # twiddle(t, m): factor t of row m
                    c, m, x0 = sub.codelet, stage.twiddle_row(sub, tile, k), stage.call_offset(sub, tile, k)
                    x = work[c.source_origin + m * c.width:c.source_origin + (m + 1) * c.width].copy()
                    for t in range(1 << c.bits):
                        work[x0 + t * c.pitch:x0 + t * c.pitch + c.width] = x * twiddle(t, m) % q
                    continue
                rows_at, call_width = call_rows(plan, stage, sub, tile, k)
                size = len(rows_at) // sub.repeat  # rows of one block
                for j in range(sub.repeat):
                    block0 = stage.twiddle_row(sub, tile, k) + j
                    for layer in (layers[::-1] if inverse else layers):
                        _layer(work, rows_at[j * size:(j + 1) * size], call_width, layer - first, twiddle, layer,
                               block0, q, inverse)
        if stage.buffered:
            for j in range(rows):
                a[at + j * apart:at + j * apart + width] = work[j * width:(j + 1) * width]


def _layer(a, rows, width: int, t: int, twiddle, layer: int, block0: int, q: int, inverse: bool) -> None:
    half = len(rows) >> (t + 1)
    for j in range(1 << t):  # the blocks of this layer among the call's rows
        w = twiddle(layer, (block0 << t) + j)
        for i in range(j * 2 * half, j * 2 * half + half):
            x = a[rows[i]:rows[i] + width]
            y = a[rows[i + half]:rows[i + half] + width]
            if inverse:
                x, y = (x + y) % q, (x - y) * w % q
            else:
                x, y = (x + y * w) % q, (x - y * w) % q
            a[rows[i]:rows[i] + width] = x
            a[rows[i + half]:rows[i + half] + width] = y


def _permute(p: Permute, a, source) -> None:
    rows = a.reshape(-1, p.row)[:1 << p.bits]
    src = source.reshape(-1, p.row)[:1 << p.bits].copy()
    rows[[p.target(i) for i in range(1 << p.bits)]] = src


def run_plan(plan: Plan, a, q: int, twiddle, inverse: bool = False):
    """`a` transformed by every stage of `plan` (`run_stage`; the inverse runs them backwards)."""
    a = a.copy()
    for stage in (plan.stages[::-1] if inverse else plan.stages):
        run_stage(plan, stage, stage.subpasses[::-1] if inverse else stage.subpasses, [a], q, twiddle, inverse)
    return a
