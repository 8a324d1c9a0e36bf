"""The GF(2^m) kernel bodies: multiplication, squaring, reduction,
multiply-accumulate, multi-squaring, inversion and the López–Dahab ladder
step, fully unrolled on register pairs.

`Field` composes the products (`mul`), reductions (`reduce`) and the
multi-squaring map (`msqr`) into whole kernels; the GF(2)[x] facts come
from `plan`. Capabilities of the target decide what is used: the linear
map and the two-lane ladder step need 256-bit registers.
"""

from __future__ import annotations

from collections import defaultdict

from ...ir.instr import ArgBase, Builder, Imm, Mem, VReg
from .msqr import map_pays, msqr_map
from .mul import MulConfig, default_config, multiply, square
from ...machine.target import Target
from .params import Gf2mParams
from .plan import field_plan, itoh_tsujii_chain, lazy_plan
from .reduce import freeze_pairs, one_pass_pays, reduce_one_pass, reduce_pairs, reduce_stream, streams_by_pairs
from .vec import Pairs, Terms, load_pairs, normalize, store_pairs, to_pairs
from .quad import BITS as QUAD_BITS, WHOLE as QUAD_WHOLE, Quad, fits as quad_fits, k_mul as quad_mul


class Field:
    """Builds the kernels of one parameter set."""

    def __init__(self, p: Gf2mParams, target: Target, cfg: MulConfig | None = None):
        self.p = p
        self.plan = field_plan(p.m, p.poly)
        self.cfg = cfg or default_config(p.m)
        self.n = p.limbs
        self.lazy_plan = lazy_plan(self.plan)
        self.isa = target.isa
        # 256-bit registers: the map and the two-lane step (AVX-512's EVEX has no vperm2i128: legalisation
        # moves the same halves with vshufi64x2)
        self.wide = target.isa.vector_bits >= 256
        # a shift of two limbs at once (vpshrdq): a reduced result's folds all at once (`reduce_one_pass`)
        self.one_pass = target.isa.has("shift_right_pair", 64)
        # whole 256-bit registers of limbs with EVEX (`valignq`, `vpshrdq`): the operations measured to pay
        # on one element in one register (`quad.WHOLE`)
        self.whole = (QUAD_WHOLE if self.one_pass and target.isa.vector_bits >= QUAD_BITS and quad_fits(self.plan)
                      else frozenset())
        # squares by spreading bits (GFNI), not carry-less products: on AMD Zen 5 a vpclmulqdq issues every
        # other cycle and four of them bounded a squaring (docs/targets.md, "Squares without carry-less products")
        self.spread = target.isa.has("affine_bytes", 8)

    def new(self) -> Pairs:
        return Pairs(Builder(vector_bits=128))

    def mul_pairs(self, v: Pairs, x: list[VReg], y: list[VReg]) -> dict[int, VReg]:
        return multiply(v, x, y, self.n, self.cfg)

    def degree(self, lazy: bool) -> int:
        """Degree bound of an element: below m reduced, below 64 n lazy."""
        return 64 * self.n - 1 if lazy else self.p.m - 1

    def reduce(self, v: Pairs, pairs: list[VReg], bound: int, lazy: bool = False) -> list[VReg]:
        """c mod f (lazy: a c' = c mod f of degree < 64 n) for c of degree <= bound."""
        if self.one_pass and not lazy and one_pass_pays(self.plan, bound):
            return reduce_one_pass(v, self.plan, pairs, bound)
        if streams_by_pairs(self.lazy_plan):
            # one pass down to the word boundary; the reduced form is one short fold further
            out = reduce_stream(v, self.lazy_plan, pairs, self.cfg)
            return out if lazy else freeze_pairs(v, self.plan, out)
        return reduce_pairs(v, self.lazy_plan if lazy else self.plan, pairs, bound, self.cfg)

    def reduce_product(self, v: Pairs, terms: dict[int, VReg], lazy: bool) -> list[VReg]:
        """A product (or sum of products) of two elements, reduced; lazy:
        its factors may be lazy and so is the result."""
        return self.reduce(v, to_pairs(v, terms, 2 * self.n), 2 * self.degree(lazy), lazy)

    def mulmod(self, v: Pairs, x: list[VReg], y: list[VReg], lazy: bool = False) -> list[VReg]:
        return self.reduce_product(v, self.mul_pairs(v, x, y), lazy)

    def sqrmod(self, v: Pairs, x: list[VReg], lazy: bool = False) -> list[VReg]:
        return self.reduce(v, square(v, x, self.n, self.spread), 2 * self.degree(lazy), lazy)

    def freeze(self, v: Pairs, x: list[VReg]) -> list[VReg]:
        """A lazy element in its reduced form."""
        return freeze_pairs(v, self.plan, x)

    # -- kernel bodies

    def k_mul(self, v):
        if "mul" in self.whole:
            return quad_mul(Quad(v.b), self.plan, self.lazy_plan, reduced=True)
        a, b = load_pairs(v, 1, self.n), load_pairs(v, 2, self.n)
        store_pairs(v, 0, self.mulmod(v, a, b), self.n)

    def k_sqr(self, v):
        store_pairs(v, 0, self.sqrmod(v, load_pairs(v, 1, self.n)), self.n)

    def k_mul_lazy(self, v):
        if "mul_lazy" in self.whole:
            return quad_mul(Quad(v.b), self.plan, self.lazy_plan, reduced=False)
        a, b = load_pairs(v, 1, self.n), load_pairs(v, 2, self.n)
        store_pairs(v, 0, self.mulmod(v, a, b, lazy=True), self.n)

    def k_sqr_lazy(self, v):
        store_pairs(v, 0, self.sqrmod(v, load_pairs(v, 1, self.n), lazy=True), self.n)

    def k_freeze(self, v):
        store_pairs(v, 0, self.freeze(v, load_pairs(v, 1, self.n)), self.n)

    def k_reduce(self, v):
        bound = 2 * self.p.m - 2
        c = load_pairs(v, 1, bound // 64 + 1)
        store_pairs(v, 0, self.reduce(v, c, bound), self.n)

    def k_mulwide(self, v):
        a, b = load_pairs(v, 1, self.n), load_pairs(v, 2, self.n)
        store_pairs(v, 0, to_pairs(v, self.mul_pairs(v, a, b), 2 * self.n), 2 * self.n)

    def k_muladd(self, v):
        a, b = load_pairs(v, 1, self.n), load_pairs(v, 2, self.n)
        c, d = load_pairs(v, 3, self.n), load_pairs(v, 4, self.n)
        terms: Terms = defaultdict(list)
        for prod in (self.mul_pairs(v, a, b), self.mul_pairs(v, c, d)):
            for o, r in prod.items():
                terms[o].append(r)
        store_pairs(v, 0, self.reduce_product(v, normalize(v, terms), lazy=False), self.n)

    def uses_map(self, k: int) -> bool:
        return self.wide and map_pays(self.p.m, k, self.isa)

    def msqr(self, v: Pairs, x: list[VReg], k: int, lazy: bool = False) -> list[VReg]:
        """x^(2^k); lazy: x may be lazy and so may the result."""
        if self.uses_map(k):
            # the map's columns are the reduced monomials: a lazy input is
            # frozen first (one short fold against a column per extra bit)
            return msqr_map(v, self.plan, self.freeze(v, x) if lazy else x, k, self.isa)
        for _ in range(k):
            x = self.sqrmod(v, x, lazy)
        return x

    def k_msqr(self, v, k: int):
        store_pairs(v, 0, self.msqr(v, load_pairs(v, 1, self.n), k), self.n)

    def k_ladder_step(self, v):
        """One Montgomery-ladder step in López–Dahab x-only coordinates.

        State (X0, Z0, X1, Z1) with R1 - R0 = P, P = (x, .). After the
        conditional swap by mask: R1 <- R0 + R1 (Z = (X0 Z1 + X1 Z0)^2,
        X = x Z + (X0 Z1)(X1 Z0)) and R0 <- 2 R0 (Z = X0^2 Z0^2,
        X = X0^4 + b Z0^4 = (X0^2 + sqrt(b) Z0^2)^2, so the curve enters as
        c = sqrt(b), one product). 6 products, 4 squarings, 9 reductions;
        the two halves are independent, which the core overlaps. Everything
        in between stays lazy; only the four results are frozen.
        """
        n = self.n
        st = [load_pairs(v, 1, n, i * n) for i in range(4)]
        x, c = load_pairs(v, 2, n), load_pairs(v, 3, n)
        mask = v.b.op("vpbroadcastq", Mem(ArgBase(4), 0, 8), bits=128)
        for a, b in ((0, 2), (1, 3)):
            for k in range(len(st[a])):
                t = v.and_(v.xor(st[a][k], st[b][k]), mask)
                st[a][k], st[b][k] = v.xor(st[a][k], t), v.xor(st[b][k], t)
        X0, Z0, X1, Z1 = st
        t1 = self.mulmod(v, X0, Z1, lazy=True)
        t2 = self.mulmod(v, X1, Z0, lazy=True)
        a = self.sqrmod(v, X0, lazy=True)
        cc = self.sqrmod(v, Z0, lazy=True)
        nZ1 = self.sqrmod(v, [v.xor(p, q) for p, q in zip(t1, t2)], lazy=True)
        nZ0 = self.mulmod(v, a, cc, lazy=True)
        bc = self.mulmod(v, c, cc, lazy=True)
        nX0 = self.sqrmod(v, [v.xor(p, q) for p, q in zip(a, bc)], lazy=True)
        terms: Terms = defaultdict(list)
        for prod in (self.mul_pairs(v, x, nZ1), self.mul_pairs(v, t1, t2)):
            for o, r in prod.items():
                terms[o].append(r)
        nX1 = self.reduce_product(v, normalize(v, terms), lazy=True)
        for i, e in enumerate((nX0, nZ0, nX1, nZ1)):
            store_pairs(v, 0, self.freeze(v, e), n, i * n)

    def k_ladder_step2(self, v):
        """The step of `k_ladder_step` with its independent operations done
        two at a time, one per ymm lane (VPCLMULQDQ): (X0 Z1, X1 Z0) and
        (X0^2, Z0^2), then (X0^2 Z0^2, sqrt(b) Z0^2), then the squarings
        ((t1 + t2)^2, (X0^2 + sqrt(b) Z0^2)^2), then the two products of
        X(R0 + R1) added lane to lane before its single 128-bit reduction:
        4 paired products, 2 paired squarings and 6 reductions in place of
        6 products, 4 squarings and 9 reductions.
        """
        n, b = self.n, v.b
        w = Pairs(b, 256)
        X0, Z0, X1, Z1 = [load_pairs(v, 1, n, i * n) for i in range(4)]
        x, c = load_pairs(v, 2, n), load_pairs(v, 3, n)
        zy = w.zero()

        def ins(y, lo, h):
            return b.op("vinserti128", y, lo, Imm(h), bits=256)

        def perm(p, q, imm):
            return b.op("vperm2i128", p, q, Imm(imm), bits=256)

        def ext(y, h):
            return b.op("vextracti128", y, Imm(h), bits=128)

        U = [ins(ins(zy, p, 0), q, 1) for p, q in zip(X0, Z0)]  # [X0 | Z0]
        V = [ins(ins(zy, p, 0), q, 1) for p, q in zip(X1, Z1)]  # [X1 | Z1]
        mask = b.op("vpbroadcastq", Mem(ArgBase(4), 0, 8), bits=256)
        for k in range(len(U)):
            t = w.and_(w.xor(U[k], V[k]), mask)
            U[k], V[k] = w.xor(U[k], t), w.xor(V[k], t)
        P1 = [perm(u, q, 0x20) for u, q in zip(U, V)]  # [X0 | X1]
        P2 = [perm(u, q, 0x13) for u, q in zip(U, V)]  # [Z1 | Z0]
        T = self.mulmod(w, P1, P2, lazy=True)  # [t1 | t2]
        Q = self.sqrmod(w, U, lazy=True)  # [X0^2 | Z0^2]
        B1 = [ins(q, ck, 1) for q, ck in zip(Q, c)]  # [X0^2 | c]
        B2 = [perm(q, q, 0x11) for q in Q]  # [Z0^2 | Z0^2]
        R = self.mulmod(w, B1, B2, lazy=True)  # [Z(2 R0) | c Z0^2]
        W = [w.xor(perm(t, r, 0x30), perm(t, q, 0x21)) for t, r, q in zip(T, R, Q)]  # [t1 + t2 | X0^2 + c Z0^2]
        Q2 = self.sqrmod(w, W, lazy=True)  # [Z(R0 + R1) | X(2 R0)]
        D1 = [ins(t, xk, 1) for t, xk in zip(T, x)]  # [t1 | x]
        D2 = [perm(t, q, 0x21) for t, q in zip(T, Q2)]  # [t2 | Z(R0 + R1)]
        prod = self.mul_pairs(w, D1, D2)
        nX1 = self.reduce_product(v, {o: v.xor(ext(r, 0), ext(r, 1)) for o, r in prod.items()}, lazy=True)
        Q2, R, nX1 = self.freeze(w, Q2), self.freeze(w, R), self.freeze(v, nX1)  # both lanes at once
        out = ([ext(r, 1) for r in Q2], [ext(r, 0) for r in R], nX1, [ext(r, 0) for r in Q2])
        for i, e in enumerate(out):
            store_pairs(v, 0, e, n, i * n)

    def k_inv(self, v):
        """Itoh–Tsujii on lazy elements, frozen once at the end."""
        a = load_pairs(v, 1, self.n)
        b = a
        for step, k in itoh_tsujii_chain(self.p.m):
            if step == "double":
                b = self.mulmod(v, self.msqr(v, b, k, lazy=True), b, lazy=True)
            else:
                b = self.mulmod(v, self.sqrmod(v, b, lazy=True), a, lazy=True)
        b = self.sqrmod(v, b, lazy=True)
        store_pairs(v, 0, self.freeze(v, b), self.n)
