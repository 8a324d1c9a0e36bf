"""Where every coefficient lives: the pass structure of a merged-layer NTT.

Coefficient index bits split into lane bits (the low ones: as many lanes as
a register holds, fewer for small arrays, see `vector_lanes`) and vector
bits. A butterfly layer on index bit k needs k to be a *slot* bit: the two
partners must sit in the same lane of two registers. Layers on high bits
run in top passes over groups of up to 8 registers; the final pass holds
8 consecutive vectors (the whole array when it is at most 16 vectors) and
brings each low bit in turn into a slot bit with an in-register shuffle
(`Swap`) that exchanges a lane bit with a slot bit whose layer is done. Bits
inside a base block (below log2 d) are swapped out of the lanes too, so base
multiplication sees coefficient k of as many blocks as a register has lanes. The forward
output order is whatever this leaves; the manifest records it exactly.

The NTT domain's order is a parameter: "fastest" is whatever the passes
leave (where a set's ISAs write vectors of several widths, whatever the
narrowest vectors' passes leave: `design.fastest_arrangement`); "standard" puts block j (a mod x^d - psi^(2 brv(j) + 1)) at
positions d*j .. d*j + d - 1, the in-place Cooley-Tukey order that FIPS 203
(ML-KEM) and FIPS 204 (ML-DSA) specify; "natural" puts block j with
psi^(2j + 1) there. Both are reached from the fastest order by a few more
lane moves at the end of the final pass (the cheapest sequence of swaps and
interleaves that permutes the index bits the group's registers hold, found
by a shortest-path search over bit arrangements) and undone at the start of
the inverse; base multiplication brings the block coefficients of its inputs
into separate registers with the cheapest swaps and puts them back after.

The inverse runs those steps backwards (a swap is its own inverse). The
forward replaces each chain of swaps on the lane bits of a 128-bit half
with element interleaves (`Interleave`, two shuffles a pair where a swap of
a low lane bit costs two blends and two shifts): an interleave rotates
those lane bits, always bringing the half's top lane bit into the slot,
which is the next bit the chain needs, and leaves the same arrangement as
the swaps at the chain's end.

Lane movements are simulated with the instructions that make them
(`shuffles`), so the plan and the kernels cannot disagree.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from ...machine.ops import LANE_BLOCK_BITS, has
from ...machine.target import Target
from .arrangements import Moves
from .params import ORDERS
from .shuffles import Interleave, LaneMoves, Swap, lane_moves


def vector_lanes(n: int, d: int, target: Target) -> int:
    """Lanes per vector: the IR's widest vector whenever the array allows it.

    A butterfly pairs two vectors, so a vector holds at most n/2 elements; and
    base multiplication wants coefficient k of `lanes` different blocks in one
    register, so at most n/d. Smaller vectors live in the low lanes of an xmm
    register (half a ymm, or fewer lanes loaded with a narrower move). The
    plan is the same for every ISA: where registers are narrower,
    legalisation splits each vector into halves, so every ISA's kernels leave
    the same order."""
    return min(target.lanes, n // max(2, d))


@dataclass(frozen=True)
class Butterflies:
    """Layer `layer` (partner distance 2^bit) on register pairs differing in `slot_bit`."""

    layer: int
    bit: int
    slot_bit: int


Step = Swap | Interleave | Butterflies


@dataclass(frozen=True)
class Pass:
    groups: tuple[tuple[int, ...], ...]  # per group: vector index held by each slot
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class NttLayout:
    n: int
    layers: int
    lanes: int  # lanes per vector
    lane_bits: int
    register_bits: int  # the register a vector lives in
    passes: tuple[Pass, ...]  # forward, in execution order
    inverse_passes: tuple[Pass, ...]  # inverse, in execution order (steps too)
    output_order: tuple[int, ...]  # array position -> coefficient index after the forward NTT
    order: str = ORDERS[0]
    # swaps after which every register holds coefficient k of the same blocks as its
    # partners (those differing in the vector bits block_slot_bits); undone by running
    # them backwards (each swap is its own inverse)
    block_steps: tuple[Swap, ...] = ()
    block_slot_bits: tuple[int, ...] = ()

    @property
    def d(self) -> int:
        return self.n >> self.layers

    @property
    def pairs_in_lanes(self) -> bool:
        """Blocks of degree 1 whose two coefficients sit side by side in the NTT
        domain (the standard and natural orders)."""
        o = self.output_order
        return self.d == 2 and all(o[k] % 2 == 0 and o[k + 1] == o[k] + 1 for k in range(0, len(o), 2))

    @property
    def pair_basemul(self) -> bool:
        """Whether base multiplication works on such pairs where they are: with
        sums of adjacent products into lanes twice as wide (`vpmaddwd`, 16-bit
        lanes only). Elsewhere the block coefficients are moved into registers
        of their own (`block_steps`) as in any other order."""
        return self.pairs_in_lanes and has("madd", 2 * self.lane_bits)

    @property
    def vectors(self) -> int:
        return self.n // self.lanes

    @property
    def vector_bytes(self) -> int:
        return self.lanes * self.lane_bits // 8

    @cached_property  # asked for every lane move the kernels and the plan make
    def shuffles(self) -> LaneMoves:
        """The instructions of lane moves in this layout's registers."""
        return lane_moves(self.lane_bits, self.register_bits)

    def move(self, step: Swap | Interleave, lo: list, hi: list) -> tuple[list, list]:
        """Where `step` puts the payloads of a register pair."""
        return self.shuffles.simulate(step, lo, hi)

    @property
    def arrangement(self) -> tuple[int, ...]:
        """The output order as a permutation of index bits: position bit -> the index bit there."""
        return _bit_arrangement(self.output_order)

    def vector_indices(self, order) -> list[list[int]]:
        return split_vectors(order, self.lanes)


def block_units(layout: NttLayout) -> list[tuple[int, ...]]:
    """The vectors base multiplication takes together: those differing only in
    the vector bits `block_slot_bits` (ordered by them), every unit once."""
    free = [1 << s for s in layout.block_slot_bits]
    units = []
    for v in range(layout.vectors):
        if any(v & m for m in free):
            continue
        units.append(tuple(v | sum(m for i, m in enumerate(free) if c >> i & 1) for c in range(1 << len(free))))
    return units


def unit_pairs(unit: tuple[int, ...], slot_bit: int) -> list[tuple[int, int]]:
    """Positions in `unit` of the vector pairs differing in vector bit `slot_bit`."""
    where = {v: i for i, v in enumerate(unit)}
    return [(where[v], where[v | 1 << slot_bit]) for v in unit if not v >> slot_bit & 1]


def split_vectors(order, lanes: int) -> list[list[int]]:
    """`order` (array position -> coefficient index) cut into vectors of `lanes`."""
    return [list(order[v:v + lanes]) for v in range(0, len(order), lanes)]


def register_key(indices) -> int:
    """How schedules name a register at a layer: the smallest coefficient index
    it holds (the same in forward and inverse, whatever the lane order)."""
    return min(indices)


def pairs(slots: int, slot_bit: int) -> list[tuple[int, int]]:
    return [(s, s | (1 << slot_bit)) for s in range(slots) if not s & (1 << slot_bit)]


def final_group_bits(n: int, lanes: int, registers_per_vector: int = 1) -> int:
    """log2 of the number of vectors the final pass holds at once.

    An array of at most 16 vectors is transformed in one pass with every
    vector live: the allocator spills a few values, but each layer's eight
    butterflies are independent chains the core overlaps, where two 8-vector
    halves would run one after the other, each one long dependency chain
    (kyber-3329's forward NTT: about 18% faster in one interleaved run).
    Larger arrays keep 8-vector groups: 16-vector groups there cost more
    passes and spills than the overlap gains. Where a vector takes two
    registers (SSE), groups of 8 vectors already fill the register file;
    where each lane takes a general register (the scalar ISA), pairs of
    vectors do (`top_pass_layers`). Groups of 4 vectors with two layers a
    pass run 2% fewer instructions there, but fewer of their runs roll into
    loops (nfl-62 at n = 1024: its scalar kernels' object grows from
    under 0.4 MB to 0.8 MB), and their NTTs took twice the ticks in one run.
    The group size changes the passes, never the output order (the final
    pass always swaps lane bits with the slot bit it just finished)."""
    vbits = (n // lanes).bit_length() - 1
    if registers_per_vector > 2:
        return min(vbits, 1)
    return vbits if vbits <= 4 and registers_per_vector == 1 else min(vbits, 3)


def top_pass_layers(registers_per_vector: int) -> int:
    """Layers a top pass does on each group of vectors it loads: three (groups
    of 8 vectors) where a vector takes one or two registers; one (pairs of
    vectors) where it takes a general register per lane, whose 4 + 4 lanes
    and their products already fill the 16 general registers."""
    return 3 if registers_per_vector <= 2 else 1


def plan(n: int, layers: int, target: Target, order: str = ORDERS[0],
         domain: tuple[int, ...] | None = None) -> NttLayout:
    """The passes of `target`'s kernels, leaving `order`; the fastest order
    is the arrangement of index bits `domain` where another ISA's kernels
    set it, else whatever these passes leave."""
    log_n = n.bit_length() - 1
    lanes = vector_lanes(n, n >> layers, target)
    lane_index_bits = lanes.bit_length() - 1
    vbits = log_n - lane_index_bits
    per_vector = target.isa.registers_per_vector(lanes, target.lane_bits)
    group_bits = final_group_bits(n, lanes, per_vector)
    per_pass = top_pass_layers(per_vector)
    d_bits = log_n - layers
    layer_bits = [log_n - 1 - l for l in range(layers)]  # coefficient bit of each layer
    passes: list[Pass] = []

    # top passes: layers on vector bits above the final group's, `per_pass` at a time
    top = [k for k in layer_bits if k >= lane_index_bits + group_bits]
    for start in range(0, len(top), per_pass):
        chunk = top[start:start + per_pass]
        vec_bits = [k - lane_index_bits for k in chunk]  # high to low
        slot_of = {vb: i for i, vb in enumerate(sorted(vec_bits))}
        groups = []
        for v in range(1 << vbits):
            if any(v >> vb & 1 for vb in vec_bits):
                continue
            groups.append(tuple(v | sum(((s >> i) & 1) << vb for vb, i in slot_of.items())
                                for s in range(1 << len(vec_bits))))
        steps = tuple(Butterflies(log_n - 1 - k, k, slot_of[k - lane_index_bits]) for k in chunk)
        passes.append(Pass(tuple(groups), steps))

    # final pass: the group's own vector bits, then lane bits by swapping
    slots = 1 << group_bits
    slot_holds = {i: lane_index_bits + i for i in range(group_bits)}  # slot bit -> coefficient bit
    lane_holds = {j: j for j in range(lane_index_bits)}
    done: list[int] = []  # slot bits whose coefficient bit needs no more work, oldest first
    steps: list[Step] = []
    for k in layer_bits:
        if k >= lane_index_bits + group_bits:
            continue
        if k >= lane_index_bits:
            sb = k - lane_index_bits
        else:
            sb = done.pop()  # the most recently finished slot: shuffle the pair just computed
            lane = next(j for j, c in lane_holds.items() if c == k)
            steps.append(Swap(lane, sb))
            lane_holds[lane], slot_holds[sb] = slot_holds[sb], k
        steps.append(Butterflies(log_n - 1 - k, k, sb))
        done.append(sb)
    for k in range(d_bits - 1, -1, -1):  # block coefficients leave the lanes
        if k >= lane_index_bits or any(c == k for c in slot_holds.values()):
            continue
        if not done:
            raise ValueError(f"n={n}: a group of {slots} registers cannot hold blocks of degree {1 << d_bits}")
        sb = done.pop()
        lane = next(j for j, c in lane_holds.items() if c == k)
        steps.append(Swap(lane, sb))
        lane_holds[lane], slot_holds[sb] = slot_holds[sb], k
    groups = tuple(tuple(g * slots + s for s in range(slots)) for g in range((1 << vbits) // slots))
    if steps:
        passes.append(Pass(groups, tuple(steps)))
    inverse = [Pass(p.groups, p.steps[::-1]) for p in passes[::-1]]
    half_bits = (LANE_BLOCK_BITS // target.lane_bits).bit_length() - 1  # lane bits inside a 128-bit lane
    forward = [Pass(p.groups, _interleaved(p.steps, lane_index_bits, half_bits)) for p in passes]
    register_bits = max(LANE_BLOCK_BITS, lanes * target.lane_bits)  # fewer lanes than an xmm: its low lanes
    layout = NttLayout(n, layers, lanes, target.lane_bits, register_bits, tuple(forward), tuple(inverse), ())
    fastest = _simulate_order(layout, forward)
    moves = Moves(lane_index_bits, group_bits, half_bits if lane_index_bits >= half_bits else 0, layout.shuffles)
    arrangement = _bit_arrangement(fastest)
    goal = _goal_arrangement(order, log_n, d_bits)
    if goal is None:
        goal = domain or arrangement
    held = lane_index_bits + group_bits  # index bits inside the final pass's registers
    if goal[held:] != arrangement[held:]:
        raise ValueError(f"the {order} order moves coefficients between the final pass's groups of "
                         f"{1 << group_bits} registers ({lanes} lanes each, n = {n})")
    if goal != arrangement and steps:
        # the final pass's lane moves after its last butterflies, and the inverse's before its
        # first, are replaced with the cheapest that reach the same arrangements from the order's
        fwd, inv = forward[-1].steps, inverse[0].steps
        last = max(i for i, st in enumerate(fwd) if isinstance(st, Butterflies)) + 1
        first = next(i for i, st in enumerate(inv) if isinstance(st, Butterflies))
        start = tuple(range(held))  # the final pass begins in index order (top passes move no lanes)
        before = moves.run(fwd[:last], start)
        after = moves.run(inv[:first], arrangement[:held])
        forward[-1] = Pass(groups, fwd[:last] + moves.cheapest(before, lambda a: a == goal[:held]))
        inverse[0] = Pass(groups, moves.cheapest(goal[:held], lambda a: a == after) + inv[first:])
    elif goal != arrangement:  # the layers needed no lane moves: a pass of its own
        forward.append(Pass(groups, moves.cheapest(arrangement[:held], lambda a: a == goal[:held])))
        inverse.insert(0, Pass(groups, moves.cheapest(goal[:held], lambda a: a == arrangement[:held])))
    layout = NttLayout(n, layers, lanes, target.lane_bits, register_bits, tuple(forward), tuple(inverse), ())
    out = _simulate_order(layout, forward)
    if _bit_arrangement(out) != goal:
        raise AssertionError(f"layout plan: the {order} order's moves leave another order")
    if _walk(layout, inverse, out)[1] != tuple(range(n)):
        raise AssertionError("layout plan: the inverse does not return the natural order")
    layout = NttLayout(n, layers, lanes, target.lane_bits, register_bits, tuple(forward), tuple(inverse), out, order)
    if layout.pair_basemul:  # base multiplication works on the pairs where they are
        return layout
    block = moves.cheapest(goal[:held], lambda a: all(a.index(c) >= lane_index_bits for c in range(d_bits)),
                           swaps_only=True)
    after = moves.run(block, goal[:held])
    used = tuple(sorted({st.slot_bit for st in block} | {after.index(c) - lane_index_bits for c in range(d_bits)}))
    return dataclasses.replace(layout, block_steps=block, block_slot_bits=used)


def _bit_arrangement(order: tuple[int, ...]) -> tuple[int, ...]:
    """Position bit -> the coefficient index bit there, for an order that permutes index bits."""
    n = len(order)
    bits = n.bit_length() - 1
    arr = tuple(order[1 << k].bit_length() - 1 for k in range(bits))
    for p in range(n):
        want = 0
        for k in range(bits):
            if p >> k & 1:
                want |= 1 << arr[k]
        if order[p] != want:
            raise AssertionError("layout plan: the order does not permute index bits")
    return arr


def _goal_arrangement(order: str, log_n: int, d_bits: int) -> tuple[int, ...] | None:
    """The arrangement `order` asks for (None: the fastest, whatever it is)."""
    if order == "fastest":
        return None
    if order == "standard":
        return tuple(range(log_n))
    if order == "natural":
        return tuple(range(d_bits)) + tuple(range(log_n - 1, d_bits - 1, -1))
    raise ValueError(f"unknown order {order!r}; orders: {', '.join(ORDERS)}")


def _interleaved(steps: tuple[Step, ...], lane_index_bits: int, half_bits: int) -> tuple[Step, ...]:
    """The forward steps with a swap of a lane bit inside a 128-bit half
    replaced by an element interleave wherever the bit it brings into the
    slot sits at the half's top lane bit of the rotated arrangement (in a
    chain it always does: chains take lane bits in decreasing order). Slots
    hold the same bits either way, lanes the same bits in another order; at
    a chain's end the order agrees again, which plan() checks by running
    the inverse on the forward's output."""
    if lane_index_bits < half_bits:  # vectors shorter than a half: no interleave keeps them in place
        return steps
    top = half_bits - 1
    canon = list(range(lane_index_bits))  # lane bit -> token of the bit there, as the swaps move them
    actual = list(canon)  # the same with the interleaves
    slot_token: dict[int, object] = {}
    out: list[Step] = []
    for st in steps:
        if isinstance(st, Butterflies):
            out.append(st)
            continue
        incoming, outgoing = canon[st.lane_bit], slot_token.get(st.slot_bit, ("slot", st.slot_bit))
        canon[st.lane_bit] = outgoing
        slot_token[st.slot_bit] = incoming
        if actual[top] == incoming:
            out.append(Interleave(st.slot_bit))
            actual[1:top + 1], actual[0] = actual[0:top], outgoing
        else:
            pos = actual.index(incoming)
            out.append(Swap(pos, st.slot_bit))
            actual[pos] = outgoing
    return tuple(out)


def _walk(layout: NttLayout, passes, start: tuple[int, ...] | None = None
          ) -> tuple[list[tuple[Butterflies, tuple[int, ...], tuple[int, ...]]], tuple[int, ...]]:
    """Run passes on coefficient indices (from natural order, or `start`): every
    butterfly with the indices of its lower and upper register, and the final
    order of the array."""
    memory = split_vectors(start or range(layout.n), layout.lanes)
    events = []
    for p in passes:
        for group in p.groups:
            regs = [memory[v] for v in group]
            for st in p.steps:
                for lo, hi in pairs(len(regs), st.slot_bit):
                    if not isinstance(st, Butterflies):
                        regs[lo], regs[hi] = layout.move(st, regs[lo], regs[hi])
                    else:
                        events.append((st, tuple(regs[lo]), tuple(regs[hi])))
            for v, r in zip(group, regs):
                memory[v] = r
    return events, tuple(i for reg in memory for i in reg)


def _simulate_order(layout: NttLayout, passes) -> tuple[int, ...]:
    """The forward output order; checks that every butterfly pairs partners."""
    events, order = _walk(layout, passes)
    for st, lo, hi in events:
        bad = [l for l in range(layout.lanes) if hi[l] != lo[l] + (1 << st.bit)]
        if bad:
            raise AssertionError(f"layout plan: layer {st.layer} pairs non-partners in lanes {bad}")
    return order


@dataclass(frozen=True)
class LayerPairs:
    """The register pairs of one layer across the whole array: coefficient indices by lane."""

    layer: int
    bit: int
    pairs: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]  # (lower register, upper register)


def layer_pairs(layout: NttLayout) -> tuple[LayerPairs, ...]:
    """Which indices share a register at each layer (the same in forward and inverse)."""
    found: dict[int, list] = {}
    bits: dict[int, int] = {}
    for st, lo, hi in _walk(layout, layout.passes)[0]:
        found.setdefault(st.layer, []).append((lo, hi))
        bits[st.layer] = st.bit
    return tuple(LayerPairs(l, bits[l], tuple(found[l])) for l in sorted(found))
