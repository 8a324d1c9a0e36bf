"""Products of 64-bit lanes assembled from 32 x 32 -> 64-bit pieces.

No x86 vector instruction below AVX-512 multiplies 64-bit lanes; `vpmuludq`
multiplies their low 32-bit halves exactly. With x = xh*2^32 + xl and
y = yh*2^32 + yl,

    x*y = xh*yh*2^64 + (xl*yh + xh*yl)*2^32 + xl*yl,

and two templates here take the halves of the 128-bit product from the four
pieces (`LOW`: x*y mod 2^64 from three; `HIGH`: floor(x*y / 2^64) from all
four, with the carries out of the middle column added in an order where no
partial sum can wrap; `HIGH_SHORT`: the high half less 0, 1 or 2, from the
three pieces above xl*yl and no carries, for Shoup's quotients, which
tolerate that). A template is data: steps in the instruction table's
width-neutral names over the inputs "x", "y" and "yh" (= y >> 32, which a
caller may supply precomputed from a table). The builders emit it
(`emit`), the verifier recognises it in a lane's term (`recognise`), and
`prove_templates` proves each template computes its half (less at most its
`slack`) for every x and y below 2^64 (an SMT solver over the integers: with each piece a variable
and each shift, mask and wrapping sum written as a division with remainder,
the claim is linear), once per process (a registered memo of no arguments,
`core.compile_cache.memo`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from ..core.compile_cache import memo
from ..ir.instr import Builder, IdiomTag, Imm, Mem, VReg
from ..machine.isa import Isa
from ..machine.ops import by_width, spec
from . import smt

BITS = 64
HALF = 32
MASK = (1 << HALF) - 1

Step = tuple[str, str, str | int, str | int]


@dataclass(frozen=True)
class Template:
    name: str  # the operation the template stands for: "mullo", "mulhu" or "mulhu_short"
    steps: tuple[Step, ...]  # (op, dst, a, b): names, ints are constants (shift counts: immediates)
    slack: int = 0  # a high half may fall short of floor(x*y / 2^64) by up to this

    @property
    def result(self) -> str:
        return self.steps[-1][1]

    @cached_property
    def pieces(self) -> int:
        return sum(op == "mul32" for op, *_ in self.steps)

    @cached_property
    def outline(self) -> tuple:
        """The operations of its result and of that result's sources (a quick test before a full match)."""
        return _outline(_expand(self, ("leaf", "x"), ("leaf", "y")))


_HALVES: tuple[Step, ...] = (("srl", "xh", "x", HALF),)
_PIECES: tuple[Step, ...] = (("mul32", "ll", "x", "y"), ("mul32", "lh", "x", "yh"), ("mul32", "hl", "xh", "y"))

LOW = Template("mullo", _HALVES + _PIECES + (
    ("add", "mid", "lh", "hl"),  # wraps: only its low half counts
    ("sll", "mid_up", "mid", HALF),
    ("add", "lo", "ll", "mid_up"),
))

# lh + (ll >> 32) <= (2^32-1)^2 + 2^32-1 < 2^64, and likewise hl + (t mod 2^32): no sum wraps
HIGH = Template("mulhu", _HALVES + _PIECES + (
    ("mul32", "hh", "xh", "yh"),
    ("srl", "ll_up", "ll", HALF),
    ("add", "t", "lh", "ll_up"),
    ("and", "t_low", "t", MASK),
    ("add", "u", "hl", "t_low"),
    ("srl", "t_up", "t", HALF),
    ("srl", "u_up", "u", HALF),
    ("add", "hi_t", "hh", "t_up"),
    ("add", "hi", "hi_t", "u_up"),
))

# x*y = hh*2^64 + (lh + hl)*2^32 + ll: what the sum drops, the low halves of lh and hl times 2^32 and ll,
# is below 3*2^64 (and the sum at most the high half: it cannot wrap)
HIGH_SHORT = Template("mulhu_short", (
    ("srl", "xh", "x", HALF),
    ("mul32", "lh", "x", "yh"),
    ("mul32", "hl", "xh", "y"),
    ("mul32", "hh", "xh", "yh"),
    ("srl", "lh_up", "lh", HALF),
    ("srl", "hl_up", "hl", HALF),
    ("add", "hi_t", "hh", "lh_up"),
    ("add", "hi", "hi_t", "hl_up"),
), slack=2)

TEMPLATES = (LOW, HIGH, HIGH_SHORT)
# the high halves a product may take, and how far below floor(x*y / 2^64) each may fall
HIGH_HALVES = {t.name: t.slack for t in (HIGH, HIGH_SHORT)}


def one_instruction(isa: Isa) -> frozenset[str]:
    """The templates' operations `isa` does on 64-bit lanes in one instruction:
    both on general registers, the low half alone on AVX-512 (vpmullq: three
    micro-operations where the pieces take six or seven), none below."""
    return frozenset(t.name for t in TEMPLATES if isa.has(t.name, BITS))


def from_pieces(products: Sequence[Template], native: Collection[str]) -> tuple[int, ...]:
    """The positions in `products` (one per row of constants y) of those not done in one instruction:
    the rows whose high halves y >> 32 the pieces read from a table."""
    return tuple(i for i, t in enumerate(products) if t.name not in native)


@dataclass
class Product:
    """One tagged product whose multiplications are templates: its
    instructions carry the idiom tag (the first its start, the last, from
    `end`, its end), `const(v)` supplies broadcast constants, and a piece
    computed once is shared, so that two templates on the same x share its
    halves and pieces. `native`: the templates' operations the target does
    in one instruction (`one_instruction`), each emitted as that operation."""

    b: Builder
    group: int
    kind: str
    const: Callable[[int], Mem]
    native: Collection[str] = frozenset()
    _shared: dict = field(default_factory=dict)
    _started: bool = False

    def op(self, name: str, *sources, notes=None) -> VReg:
        """`name` on `sources` inside the product (computed once; a new
        instruction takes its comment from `notes`). A row that reads its
        destination (merge-masked, accumulating) writes its first source in
        place: that value is then gone, so never shared."""
        key = (name, *sources)
        if key not in self._shared:
            role, self._started = ("body" if self._started else "start"), True
            made = self._made(name, sources, role, next(notes, "") if notes is not None else "")
            if not in_place(name):
                self._shared[key] = made
            return made
        return self._shared[key]

    def high_half(self, template: Template, v: int) -> Mem | None:
        """A constant y's yh = y >> 32 for `emit`ting `template`; None where that is one instruction
        (nothing to supply)."""
        return None if template.name in self.native else self.const(v >> HALF)

    def end(self, name: str, *sources) -> VReg:
        return self._made(name, sources, "end", "")

    def _made(self, name: str, sources: tuple, role: str, comment: str) -> VReg:
        tag = IdiomTag(self.group, self.kind, role, 1)
        if in_place(name):
            self.b.emit(name, *sources, comment=comment, idiom=tag)
            return sources[0]
        return self.b.op(name, *sources, idiom=tag, comment=comment)

    def emit(self, template: Template, x, y, yh=None, comment: str = "") -> VReg:
        """`template` for x*y (`yh`: y >> 32 as an operand, or None to
        compute it); the first instruction emitted carries `comment`."""
        notes = iter((comment,))
        if template.name in self.native:
            return self.op(by_width(template.name, BITS), x, y, notes=notes)
        env = {"x": x, "y": y}
        if yh is not None:
            env["yh"] = yh

        def value(name: str):
            if name not in env:  # y >> 32, computed where first read (x's pieces come first)
                env[name] = self.op(by_width("srl", BITS), y, Imm(HALF), notes=notes)
            return env[name]

        for op, dst, a, c in template.steps:
            src_c = value(c) if isinstance(c, str) else Imm(c) if op in ("srl", "sll") else self.const(c)
            env[dst] = self.op(by_width(op, BITS), value(a), src_c, notes=notes)
        return env[template.result]


def in_place(name: str) -> bool:
    """Whether row `name` reads its destination (merge-masked, accumulating): its first source is written."""
    return "r" in spec(name).slots[0].access


# -- recognition in the verifier's lane terms: ("leaf", value, lane), ("imm", k) or (op, term, ...): an
# operation's sources in its row's order (a merge-masked row's old value and mask first)

_COMMUTATIVE = {"add", "mul32", "and", "mullo", "mulhu", "minu", "xor"}


def recognise(term: tuple, constant: Callable[[tuple], tuple[int, ...] | None]) -> tuple:
    """`term` with every instance of a template replaced by (name, x, y),
    bottom up; `constant(leaf)` is a leaf's exact value in each lane the
    term stands for (None unless it has one in each). A precomputed yh is
    accepted where it is a constant equal to y >> 32 in each lane."""
    return _recognise(term, constant, {})[0]


def _recognise(term: tuple, constant, seen: dict) -> tuple[tuple, list[tuple]]:
    """The term rewritten, and the pieces (mul32 terms) in it outside the
    instances found; `seen`: a subterm met before (one object read twice) by id."""
    if term[0] in ("leaf", "imm", "const"):
        return term, []
    if id(term) not in seen:
        seen[id(term)] = (term, _rewritten(term, constant, seen))
    return seen[id(term)][1]


def _rewritten(term: tuple, constant, seen: dict) -> tuple[tuple, list[tuple]]:
    parts = [_recognise(t, constant, seen) for t in term[1:]]
    term = (term[0], *(t for t, _ in parts))
    pieces = list({id(m): m for m in [m for _, ms in parts for m in ms] + ([term] if term[0] == "mul32" else [])}
                  .values())
    for template in TEMPLATES:
        if len(pieces) != template.pieces or _outline(term) != template.outline:
            continue
        for x, y in _factors(pieces):
            if same_term(term, _expand(template, x, y), constant):
                return (template.name, x, y), []
    return term, pieces


def _factors(pieces: list[tuple]) -> set[tuple[tuple, tuple]]:
    """The (x, y) a template's pieces may multiply: those of a piece (xl*yl), and for a piece xh*y
    (`HIGH_SHORT` has no xl*yl) the x whose high half it reads."""
    found = set()
    for m in pieces:
        for a, c in ((m[1], m[2]), (m[2], m[1])):
            found.add((a, c))
            if a[0] == "srl" and a[2] == ("imm", HALF):
                found.add((a[1], c))
    return found


def _outline(term: tuple) -> tuple:
    return (term[0], *sorted(t[0] for t in term[1:]))


def _expand(template: Template, x: tuple, y: tuple) -> tuple:
    env = {"x": x, "y": y, "yh": ("srl", y, ("imm", HALF))}
    for op, dst, a, c in template.steps:
        env[dst] = (op, env[a], env[c] if isinstance(c, str) else ("imm", c) if op in ("srl", "sll") else
                    ("const", c))
    return env[template.result]


def same_term(actual: tuple, expected: tuple, constant, seen: dict | None = None) -> bool:
    """Whether `actual` computes `expected` (a template's term), constants compared by value; `seen`:
    the pairs of subterms compared already (a subterm read several times is one object)."""
    seen = {} if seen is None else seen
    key = (id(actual), id(expected))
    if key not in seen:
        seen[key] = _same(actual, expected, constant, seen)
    return seen[key]


def _same(actual: tuple, expected: tuple, constant, seen: dict) -> bool:
    if expected[0] == "const":
        value = constant(actual) if actual[0] == "leaf" else None
        return value is not None and all(v == expected[1] for v in value)
    if expected[0] == "leaf":  # a constant may be read into different registers: equal values are the same
        value = constant(expected)
        return actual == expected or (value is not None and actual[0] == "leaf" and constant(actual) == value)
    if expected[0] == "imm":
        return actual == expected
    if expected[0] == "srl" and actual[0] == "leaf" and expected[2] == ("imm", HALF):
        # y >> 32 supplied from a table: the same constant
        y, yh = constant(expected[1]) if expected[1][0] == "leaf" else None, constant(actual)
        return y is not None and yh is not None and all(h == v >> HALF for h, v in zip(yh, y, strict=True))
    if actual[0] != expected[0] or len(actual) != len(expected):
        return False
    if all(same_term(a, e, constant, seen) for a, e in zip(actual[1:], expected[1:])):
        return True
    return expected[0] in _COMMUTATIVE and same_term(actual[1], expected[2], constant, seen) and \
        same_term(actual[2], expected[1], constant, seen)


# -- the proof

class WideProductError(Exception):
    pass


@memo(maxsize=1)
def prove_templates() -> None:
    """For every x, y in [0, 2^64): LOW gives x*y mod 2^64, HIGH floor(x*y / 2^64) and HIGH_SHORT
    that less 0, 1 or 2."""
    for template in TEMPLATES:
        _prove(template)


def _prove(template: Template) -> None:
    import z3

    solver = z3.Solver()
    fresh = iter(range(1 << 30))

    def var(lo: int, hi: int):
        v = z3.Int(f"v{next(fresh)}")
        solver.add(v >= lo, v <= hi)
        return v

    splits: dict[int, tuple] = {}
    digits: set[int] = set()

    def split(v, at: int = HALF):
        """v = high*2^at + low with 0 <= low < 2^at, remembered per v (and at)."""
        key = (v.get_id(), at)
        if key not in splits:
            top = BITS - at
            if v.get_id() in digits and at == HALF:
                splits[key] = (z3.IntVal(0), v)
            else:
                high, low = var(0, (1 << top) - 1), var(0, (1 << at) - 1)
                solver.add(v == high * (1 << at) + low)
                splits[key] = (high, low)
                digits.update((high.get_id(), low.get_id()) if at == HALF else ())
        return splits[key]

    pieces: dict[tuple[int, int], object] = {}

    def piece(a, c):
        """The product of two 32-bit digits: a variable, one per unordered pair."""
        key = tuple(sorted((split(a)[1].get_id(), split(c)[1].get_id())))
        if key not in pieces:
            pieces[key] = var(0, MASK * MASK)
        return pieces[key]

    x, y = var(0, (1 << BITS) - 1), var(0, (1 << BITS) - 1)
    xh, xl = split(x)
    yh, yl = split(y)
    env = {"x": x, "y": y, "yh": yh}
    for op, dst, a, c in template.steps:
        va = env[a]
        vc = env[c] if isinstance(c, str) else c
        if op == "mul32":
            out = piece(va, vc)
        elif op == "srl":
            out = split(va, vc)[0]
        elif op == "sll":
            out = split(va, BITS - vc)[1] * (1 << vc)
        elif op == "and" and vc == MASK:
            out = split(va)[1]
        elif op == "add":
            carry = var(0, 1)
            out = var(0, (1 << BITS) - 1)
            solver.add(out == va + vc - carry * (1 << BITS))
        else:
            raise WideProductError(f"{template.name}: no proof rule for {op} by {c}")
        env[dst] = out
    r = env[template.result]
    # x*y in its pieces: the same digit products the template multiplied
    product = piece(xh, yh) * (1 << (2 * HALF)) + (piece(xl, yh) + piece(xh, yl)) * (1 << HALF) + piece(xl, yl)
    if template.name == "mullo":
        solver.add((product - r) % (1 << BITS) != 0)
    else:
        solver.add(z3.Or(r * (1 << BITS) > product, product >= (r + 1 + template.slack) * (1 << BITS)))
    if smt.check(solver) != z3.unsat:
        raise WideProductError(f"the {template.name} template of 64-bit products is not proven")
