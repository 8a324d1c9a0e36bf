"""The plain-C baseline the NTT kernels are timed beside: its constants,
computed with SymPy alone (independent of the family's own maths), the
`kg_params.h` they are compiled in with, and its build (`-O3 -march=native`).

One C file, `harness/baseline_ntt.c`, as a compiler sees a straightforward
NTT: signed Montgomery arithmetic (R = 2^W) with lazy sums in the lane and
products twice as wide, for odd q < 2^(W-2). The lane width is a value:
`LANES` holds what differs between widths (the C types, R, the limit on q,
the tables' layout), and `kg_params.h` hands the types to the C file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...harness import toolchain
from ...harness.cpu import march_flags

FLAGS = ("-O3", "-std=c11", "-Wall")


@dataclass(frozen=True)
class Lane:
    """The facts of one lane width the baseline depends on: the C element
    type, the type of its products, R (the Montgomery radix, 2^width), the
    limit on q (q < 2^q_bits), the base of the Barrett shift (shift =
    barrett_base + bitlen(q) keeps v * a inside the product type), and how
    the tables of kg_params.h are laid out (column width, entries per row)."""

    ctype: str
    wide: str
    r: int
    q_bits: int
    barrett_base: int
    digits: int
    per_row: int


SOURCE = "baseline_ntt.c"
LANES = {
    16: Lane("int16_t", "int32_t", 1 << 16, 14, 14, 6, 10),
    32: Lane("int32_t", "int64_t", 1 << 32, 30, 30, 11, 8),
    # GCC's and Clang's __int128 on x86-64: C has no standard 128-bit type
    64: Lane("int64_t", "__int128", 1 << 64, 62, 62, 20, 4),
}


def lane_of(width: int) -> Lane:
    """The facts of `width`-bit lanes; ValueError for a width without a baseline."""
    if width not in LANES:
        *most, last = map(str, LANES)
        raise ValueError(f"the plain-C baseline has {', '.join(most)} and {last}-bit lanes, not {width}")
    return LANES[width]


@dataclass(frozen=True)
class BaselineConstants:
    """Constants of the C baseline.

    Twiddles are in Montgomery form (times R = 2^width: 2^16, 2^32 or 2^64) and
    centred: ``zetas[i] = R zeta^brv_L(i)`` (2^L entries), ``zetas_inv`` the
    2^L - 1 twiddles of the inverse in the order it reads them,
    ``zetas_block[j] = R zeta^(2 brv_L(j) + 1)`` (2^L entries), ``final_scale
    = R^2 / 2^L``. ``width`` (16, 32 or 64) picks the C file's types and limits.
    """

    n: int
    q: int
    layers: int
    zetas: tuple[int, ...]
    zetas_inv: tuple[int, ...]
    zetas_block: tuple[int, ...]
    final_scale: int
    width: int = 16

    def __post_init__(self) -> None:
        for name in ("zetas", "zetas_inv", "zetas_block"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))
        n, q, L = self.n, self.q, self.layers
        try:
            bits = lane_of(self.width).q_bits
        except ValueError as e:
            raise ValueError(f"BaselineConstants.width: {e}") from None
        if n < 2 or n & (n - 1):
            raise ValueError(f"BaselineConstants.n must be a power of two, got {n}")
        if not (2 < q < 1 << bits and q % 2):
            raise ValueError(f"BaselineConstants.q must be odd and below 2^{bits}, got {q}")
        if L < 1 or n >> L not in (1, 2, 4, 8) or (n >> L) << L != n:
            raise ValueError(f"BaselineConstants.layers: n >> layers must be 1, 2, 4 or 8 "
                             f"(n={n}, layers={L})")
        sizes = {"zetas": 1 << L, "zetas_inv": (1 << L) - 1, "zetas_block": 1 << L}
        for name, size in sizes.items():
            values = getattr(self, name)
            if len(values) != size:
                raise ValueError(f"BaselineConstants.{name} needs {size} entries, got {len(values)}")
            if any(abs(v) > q // 2 for v in values):
                raise ValueError(f"BaselineConstants.{name} entries must be centred mod q")
        if abs(self.final_scale) > q // 2:
            raise ValueError("BaselineConstants.final_scale must be centred mod q")

    @property
    def d(self) -> int:
        return self.n >> self.layers

    @property
    def lane(self) -> Lane:
        return LANES[self.width]


def _c_table(name: str, values: Sequence[int], comment: str, ln: Lane) -> str:
    k = ln.per_row
    rows = [", ".join(f"{v:{ln.digits}d}" for v in values[i:i + k]) for i in range(0, len(values), k)]
    body = ",\n    ".join(rows)
    return f"/* {comment} */\nstatic const {ln.ctype} {name}[{len(values)}] = {{\n    {body},\n}};\n"


def header(p: BaselineConstants) -> str:
    """Text of ``kg_params.h`` for the C file of ``p.width``."""
    ln, w = p.lane, p.width
    qinv = pow(p.q, -1, ln.r)
    qinv_signed = qinv - ln.r if qinv >= ln.r // 2 else qinv
    shift = ln.barrett_base + p.q.bit_length()
    barrett_v = ((1 << shift) + p.q // 2) // p.q
    return (
        f"/* kg_params.h: constants of the plain C NTT baseline (harness/{SOURCE}).\n"
        f" * n={p.n} q={p.q} layers={p.layers} d={p.d}; R = 2^{w}; values centred mod q. */\n"
        "#ifndef KG_PARAMS_H\n#define KG_PARAMS_H\n\n#include <stdint.h>\n\n"
        f"typedef {ln.ctype} kg_lane;\n"
        f"typedef u{ln.ctype} kg_ulane;\n"
        f"typedef {ln.wide} kg_wide;\n"
        f"#define KG_LANE_BITS {w}\n"
        f"#define KG_LANE_MAX {(1 << (w - 1)) - 1}\n"
        f"#define KG_Q_BITS {ln.q_bits}\n"
        f"#define KG_N {p.n}\n"
        f"#define KG_Q {p.q}\n"
        f"#define KG_QINV ({qinv_signed}) /* q^-1 mod 2^{w}, as int{w} */\n"
        f"#define KG_LAYERS {p.layers}\n"
        f"#define KG_D {p.d}\n"
        f"#define KG_BARRETT_SHIFT {shift}\n"
        f"#define KG_BARRETT_V {barrett_v} /* round(2^KG_BARRETT_SHIFT / q) */\n"
        f"#define KG_F ({p.final_scale}) /* R^2 / 2^L mod q */\n\n"
        + _c_table("kg_zetas", p.zetas, "R zeta^brv(i), forward, index i", ln)
        + "\n"
        + _c_table("kg_zetas_inv", p.zetas_inv, "R (-zeta^-brv(k)), inverse, in reading order", ln)
        + "\n"
        + _c_table("kg_zetas_block", p.zetas_block, "R zeta^(2 brv(j) + 1), block j of basemul", ln)
        + "\n#endif\n"
    )


def _brv(x: int, bits: int) -> int:
    return int(format(x, f"0{bits}b")[::-1], 2) if bits else 0


def _centre(x: int, q: int) -> int:
    x %= q
    return x - q if x > q // 2 else x


def constants_sympy(n: int, q: int, layers: int, width: int = 16) -> BaselineConstants:
    """The constants for `width`-bit lanes (R = 2^width) computed with SymPy
    alone: zeta is the smallest primitive 2^(layers+1)-th root of unity mod q
    (17 for q = 3329, 1753 for q = 8380417). ValueError if the baseline
    cannot take these parameters."""
    from sympy import isprime
    from sympy.ntheory import n_order, primitive_root

    big_r = lane_of(width).r
    m = 1 << (layers + 1)
    if not isprime(q) or (q - 1) % m:
        raise ValueError(f"q={q} has no primitive {m}-th root of unity")
    g = primitive_root(q)
    zeta = min(pow(g, k * (q - 1) // m, q) for k in range(1, m, 2))
    assert n_order(zeta, q) == m
    r = big_r % q
    L = layers

    def mont(e: int) -> int:
        return _centre(r * pow(zeta, e % m, q), q)

    zetas = [mont(_brv(i, L)) for i in range(1 << L)]
    inv: list[int] = []
    for level in reversed(range(L)):
        for g_idx in range(1 << level):
            k = (1 << level) + g_idx
            inv.append(_centre(-r * pow(zeta, -_brv(k, L) % m, q), q))
    block = [mont(2 * _brv(j, L) + 1) for j in range(1 << L)]
    final = _centre(r * r * pow(1 << L, -1, q), q)
    return BaselineConstants(n=n, q=q, layers=L, zetas=tuple(zetas), zetas_inv=tuple(inv),
                             zetas_block=tuple(block), final_scale=final, width=width)


def build(c: BaselineConstants, workdir: Path, march: str = "native") -> Path:
    """The baseline for `c` (the C file of its width) compiled for the CPU
    level `march` into a shared object (cached)."""
    return toolchain.build_shared_c(SOURCE, "kg-baseline", (*FLAGS, *march_flags(march)), workdir,
                                 "building the C baseline", headers={"kg_params.h": header(c)})
