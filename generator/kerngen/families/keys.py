"""Every key of a parameter file, described: its type, default, allowed values and what it changes.

The allowed values and defaults are the validation's own constants (`core.params`, each family's
`params.py`), read here, not restated; `tests/test_docs.py` checks that the keys described are exactly the
keys validation accepts (`KEYS` of each family) and that each stated default is what a minimal file loads
with. The documentation's parameter reference (`docs/parameters.md`) is rendered from this table by
`docs/references.py`, so the page and the loader cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.params import ABIS, COMMON_KEYS, MAX_NAME, default_prefix
from ..machine.target import PLATFORMS, VISIBILITIES
from .gf2m import params as gf2m
from .ntt import batches, params as ntt
from .ntt.maths import RINGS


@dataclass(frozen=True)
class Key:
    """One key of a parameter file."""

    name: str
    type: str  # as TOML spells it
    default: str  # "required", or the value a file without the key gets (as TOML spells it, or in words)
    allowed: str  # the values validation accepts, in words
    changes: str  # what the key changes in the bundle

    @property
    def required(self) -> bool:
        return self.default == "required"


def _names(values) -> str:
    return ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values)


COMMON = (
    Key("name", "string", "required",
        f"1 to {MAX_NAME} lower-case letters, digits and dashes, the first a letter or digit",
        "names the bundle's files (NAME.asm, NAME.h, ...) and, without its dashes, the default symbol prefix"),
    Key("family", "string", "required", _names(("ntt", "gf2m")),
        "which family of kernels the file describes: number-theoretic transforms or binary-field arithmetic; "
        "each family has keys of its own (below)"),
    Key("isa", "string or list of strings", "the family's first ISA",
        "a name or a list of distinct names: per family, below",
        "the instruction sets the kernels are built for, each its own set of functions; with several, the "
        "bundle's dispatch unit calls the first the CPU runs (`emit --isa` replaces it)"),
    Key("abi", "string or list of strings", f'"{ABIS[0]}"', f"{_names(ABIS)}, or a list of them, none twice",
        "the calling conventions and object formats: one .asm file each ("
        + ", ".join(f"{p.name}: {p.abi.title}, {p.fmt.name} objects" for p in PLATFORMS.values())
        + "; `emit --abi` replaces it)"),
    Key("visibility", "string", f'"{VISIBILITIES[0]}"', _names(VISIBILITIES),
        "whether the exported symbols are hidden in a shared library the bundle is linked into, or exported "
        "from it (`emit --visibility`)"),
    Key("prefix", "string", f'"{default_prefix("my-set")}" for name = "my-set": kg_ and the name without dashes',
        "a C identifier", "the prefix of every exported symbol and C macro (`emit --prefix`)"),
    Key("description", "string", "none", "any string", "a line of prose about the set; `kerngen list` shows it"),
)

NTT = (
    Key("n", "integer", "required", f"a power of two from 2 to 2^{ntt.PLANNED_MAX.bit_length() - 1}",
        f"the polynomial degree: the ring Z_q[x]/(x^n + 1) or (x^n - 1); above {ntt.UNROLLED_MAX} the transforms "
        "are planned (stages of loops over verified codelets)"),
    Key("q", "integer", "required",
        f"an odd prime; below 2^15 on 16-bit lanes, below 2^31 on 32-bit lanes, below 2^62 or 2^64 - 2^b + 1 "
        f"(b <= {ntt.MAX_B}) on 64-bit lanes; at least " + ", ".join(f"2^{v.bit_length() - 1} on {w}-bit lanes"
                                                  for w, v in ntt.MIN_Q.items() if v > 3)
        + "; the bound analysis decides the largest q a schedule keeps in range",
        "the modulus; the layers the NTT can have (2^(layers+1) divides q - 1), the multiplication and "
        "reduction constants"),
    Key("width", "integer", str(ntt.WIDTHS[0]), _names(ntt.WIDTHS),
        "the lane width in bits: 16 or 32 bits per lane of a vector register, or 64-bit words"),
    Key("isa", "string or list of strings", f'"{ntt.ISAS[0]}"',
        f"{_names(ntt.ISAS)}; \"scalar\" only with width = 64 and n >= {ntt.SCALAR_MIN_N}; \"auto\" alone",
        "the instruction sets built; \"auto\" chooses per width: "
        + "; ".join(f"{w}-bit: {', '.join(i)}" for w, i in ntt.AUTO_ISAS.items())),
    Key("layers", "integer", "as many as q and n allow",
        f"from the fewest that leave base blocks of degree at most {1 << ntt.MAX_BLOCK_BITS} to the most q allows "
        "(2^(layers+1) | q - 1; in the cyclic ring 2^layers | q - 1)",
        "the NTT's layers L: base blocks of degree d = n >> L, multiplied by the base multiplication"),
    Key("reduction", "string", f'"{ntt.POLICY.default}"', _names(ntt.POLICY.choices), ntt.POLICY.help),
    Key("reducer", "string", f'"{ntt.REDUCER.default}"', _names(ntt.REDUCER.choices) + "; a choice other than "
        "\"auto\" only on the signed lanes of Montgomery's multiplication, \"special\" only for a q of special form",
        ntt.REDUCER.help),
    Key("mul", "string", f'"{ntt.MULS[0]}"', _names(ntt.MULS) + "; \"montgomery\" on 16- and 32-bit lanes, "
        "\"shoup\" with q below a quarter of the lane, \"special\" for q = 2^64 - 2^b + 1",
        "the multiplication strategy: Montgomery's signed product, Shoup's product with precomputed w' (Harvey's "
        "lazy butterflies), the special 64-bit form, or the cheaper by the cost model"),
    Key("order", "string", f'"{ntt.ORDER.default}"', _names(ntt.ORDER.choices), ntt.ORDER.help),
    Key("order_isa", "string", "the narrowest vectors' ISA", "one of the ISAs built, with order = \"fastest\"",
        "with ISAs of several vector widths, whose fastest order is the NTT domain every ISA's kernels share"),
    Key("basemul_acc", "list of integers", "[]",
        f"distinct k from {ntt.ACC_COUNTS[0]} to {ntt.ACC_COUNTS[-1]}",
        "adds fused kernels r = a_0*b_0 + ... + a_(k-1)*b_(k-1) in the NTT domain (a matrix-vector product's rows)"),
    Key("output", "string or table", f'"{ntt.OUTPUTS[0]}"',
        f"{_names(ntt.OUTPUTS)}, or a table of kernel ({_names(ntt.OUTPUT_KERNELS)}) to one of them or a "
        "bound B on |value|",
        "what each kernel promises of its output: the proven bound (lazy), (-q, q) (centred), [0, q) "
        "(canonical) or |value| <= B; stricter outputs cost a final reduction"),
    Key("ring", "string", f'"{RINGS[0]}"', _names(RINGS),
        "the ring: Z_q[x]/(x^n + 1) (lattice schemes) or Z_q[x]/(x^n - 1) (the DFT of STARK provers)"),
    Key("coset", "integer", "1 (no coset)", "an integer g with 1 < g < q and g^n != 1 mod q",
        "the NTT evaluates on g times the ring's points (a low-degree extension's coset)"),
    Key("root", "integer", "the smallest primitive root of the order needed",
        "w with 1 < w < q of order exactly 2^K (K = layers + 1, or layers in the cyclic ring); not with generator",
        "psi itself: the root of unity every twiddle is a power of, so outputs match another library's order"),
    Key("generator", "integer", "none", "g with 1 < g < q whose g^((q-1)/2^K) has order 2^K; not with root",
        "derives psi = g^((q-1)/2^K), the rule of Plonky3's two_adic_generator (its GENERATOR: "
        + ", ".join(f"{name} {g}" for name, g in batches.PLONKY3_GENERATORS.values()) + ")"),
    Key("columns", "integer", "1", "a positive multiple of the widest ISA's lanes (or 1)",
        "every function transforms a row-major n x C matrix whose columns are the polynomials (a STARK trace), "
        "by vertical butterflies; a planned transform at any n"),
    Key("lde", "table", "none (no extension)",
        f"{{ added_bits = k, shift = g }}, k from 1 to {batches.MAX_ADDED_BITS}, g outside the extension's points; "
        "the cyclic ring without a coset, planned sets only",
        "adds lde(out, in): n rows of evaluations to n 2^k rows on the coset g <w_(n 2^k)>, Plonky3's "
        "coset_lde_batch"),
)

GF2M = (
    Key("m", "integer", "required", "2 to 1024", "the field degree: elements of GF(2^m) in ceil(m/64) 64-bit limbs"),
    Key("poly", "list of integers", "required",
        "the exponents of an irreducible trinomial or pentanomial, decreasing, the first m, the last 0, the second "
        "at most m/2",
        "the field polynomial f: the reduction is specialised to its exponents (shifts and xors)"),
    Key("isa", "string or list of strings", f'"{gf2m.ISAS[0]}"', _names(gf2m.ISAS),
        "the instruction sets built (carry-less products: PCLMULQDQ on xmm, VPCLMULQDQ on ymm and zmm)"),
)

FAMILIES = {"ntt": NTT, "gf2m": GF2M}
FAMILY_KEYS = {"ntt": ntt.KEYS, "gf2m": gf2m.KEYS}
COMMON_NAMES = COMMON_KEYS
