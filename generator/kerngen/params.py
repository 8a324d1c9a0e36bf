"""Parameter files: load, validate, and return typed, immutable parameters.

Every rule is checked here and reported as one `ParamError` naming the key and
the rule; nothing downstream sees an invalid parameter set.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import sympy

from .errors import ParamError
from .gf2x import is_irreducible

POLICIES = ("eager", "layer", "index", "minimal")
REDUCERS = ("auto", "barrett", "special")
MAX_BLOCK_BITS = 3  # base blocks of degree at most 8 (base multiplication d = 1, 2, 4, 8)
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class NttParams:
    """Negacyclic NTT over Z_q[x]/(x^n+1) on `width`-bit lanes."""

    name: str
    n: int
    q: int
    width: int
    isa: str
    layers: int  # NTT layers L; block degree d = n >> L
    policy: str
    reducer: str  # "auto", "barrett" or "special"
    prefix: str
    source: str  # the file (or text) these came from, for messages

    family = "ntt"

    @property
    def d(self) -> int:
        return self.n >> self.layers


@dataclass(frozen=True)
class Gf2mParams:
    """Binary field GF(2^m) = GF(2)[x]/(f), f given by its exponents."""

    name: str
    m: int
    poly: tuple[int, ...]  # exponents, strictly decreasing, poly[0] == m, poly[-1] == 0
    isa: str
    prefix: str
    source: str

    family = "gf2m"

    @property
    def limbs(self) -> int:
        return (self.m + 63) // 64


Params = NttParams | Gf2mParams

_COMMON_KEYS = {"name", "family", "isa", "prefix", "description"}
_NTT_KEYS = _COMMON_KEYS | {"n", "q", "width", "layers", "reduction", "reducer"}
_GF2M_KEYS = _COMMON_KEYS | {"m", "poly"}


def _require(src: str, table: dict, key: str, typ: type, what: str):
    if key not in table:
        raise ParamError(src, key, f"missing; it must be {what}")
    value = table[key]
    if typ is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ParamError(src, key, f"must be {what}, got {value!r}")
    if typ is not int and not isinstance(value, typ):
        raise ParamError(src, key, f"must be {what}, got {value!r}")
    return value


def max_layers(n: int, q: int) -> int:
    """Largest L with 2^(L+1) | q-1, capped at log2 n."""
    two_adicity = ((q - 1) & -(q - 1)).bit_length() - 1
    return min(two_adicity - 1, n.bit_length() - 1)


def default_prefix(name: str) -> str:
    return "kg_" + re.sub(r"[^a-z0-9]", "", name)


def from_mapping(table: dict, source: str, policy: str | None = None, prefix: str | None = None,
                 reducer: str | None = None) -> Params:
    """Validate a parsed parameter table; `policy`/`prefix` override the file's."""
    src = source
    name = _require(src, table, "name", str, "a lower-case name of letters, digits and dashes")
    if not _NAME.match(name):
        raise ParamError(src, "name", f"must be lower-case letters, digits and dashes, got {name!r}")
    family = _require(src, table, "family", str, '"ntt" or "gf2m"')
    if family == "ntt":
        allowed = _NTT_KEYS
    elif family == "gf2m":
        allowed = _GF2M_KEYS
    else:
        raise ParamError(src, "family", f'must be "ntt" or "gf2m", got {family!r}')
    for key in table:
        if key not in allowed:
            raise ParamError(src, key, f"unknown key for family {family!r}; allowed keys: {', '.join(sorted(allowed))}")
    if "description" in table and not isinstance(table["description"], str):
        raise ParamError(src, "description", "must be a string")
    pre = prefix if prefix is not None else table.get("prefix", default_prefix(name))
    if not isinstance(pre, str) or not _PREFIX.match(pre):
        raise ParamError(src, "prefix", f"must be a C identifier, got {pre!r}")
    if family == "ntt":
        return _ntt(table, src, name, pre, policy, reducer)
    return _gf2m(table, src, name, pre)


def _ntt(table: dict, src: str, name: str, prefix: str, policy: str | None, reducer: str | None) -> NttParams:
    width = table.get("width", 16)
    if isinstance(width, bool) or not isinstance(width, int):
        raise ParamError(src, "width", f"must be an integer, got {width!r}")
    if width != 16:
        raise ParamError(src, "width", f"must be 16 (only 16-bit lanes are implemented), got {width}")
    isa = table.get("isa", "avx2")
    if isa != "avx2":
        raise ParamError(src, "isa", f'must be "avx2" for the ntt family, got {isa!r}')
    n = _require(src, table, "n", int, "a power of two")
    if n < 2 or n > 4096 or n & (n - 1):
        raise ParamError(src, "n", f"must be a power of two between 2 and 4096, got {n}")
    q = _require(src, table, "q", int, "an odd prime")
    if q < 3 or not sympy.isprime(q):
        raise ParamError(src, "q", f"must be an odd prime, got {q}")
    if q >= 1 << (width - 1):
        raise ParamError(src, "q", f"must be below 2^{width - 1} = {1 << (width - 1)} for {width}-bit signed lanes, got {q}")
    top = max_layers(n, q)
    min_layers = max(1, (n.bit_length() - 1) - MAX_BLOCK_BITS)
    if "layers" in table:
        layers = _require(src, table, "layers", int, "a positive integer")
        if not 1 <= layers <= top:
            raise ParamError(src, "layers", f"must be between 1 and {top} (2^(layers+1) must divide q-1 = {q - 1} and 2^layers must divide n), got {layers}")
    else:
        layers = top
    if layers < min_layers:
        need = 1 << (min_layers + 1)
        raise ParamError(
            src, "q",
            f"q-1 = {q - 1} must be divisible by {need}: an NTT of degree n={n} needs at least {min_layers} layers "
            f"(base blocks of degree at most {n >> min_layers}), and q allows only {top}",
        )
    pol = policy if policy is not None else table.get("reduction", "index")
    if pol not in POLICIES:
        raise ParamError(src, "reduction", f"must be one of {', '.join(POLICIES)}, got {pol!r}")
    red = reducer if reducer is not None else table.get("reducer", "auto")
    if red not in REDUCERS:
        raise ParamError(src, "reducer", f"must be one of {', '.join(REDUCERS)}, got {red!r}")
    if red == "special":
        from .kernels.reductions import reducers
        if "special" not in reducers(q):
            raise ParamError(src, "reducer", f"q = {q} has no special form: no 2^a mod q with at most three signed "
                                             "binary digits gives a reduction below 2^14; use barrett or auto")
    return NttParams(name, n, q, width, isa, layers, pol, red, prefix, src)


def _gf2m(table: dict, src: str, name: str, prefix: str) -> Gf2mParams:
    isa = table.get("isa", "avx2")
    if isa not in ("avx2", "sse"):
        raise ParamError(src, "isa", f'must be "avx2" or "sse", got {isa!r}')
    m = _require(src, table, "m", int, "the field degree, an integer")
    if not 2 <= m <= 1024:
        raise ParamError(src, "m", f"must be between 2 and 1024, got {m}")
    poly = _require(src, table, "poly", list, "the list of exponents of the field polynomial, e.g. [233, 74, 0]")
    if not poly or any(isinstance(e, bool) or not isinstance(e, int) for e in poly):
        raise ParamError(src, "poly", f"must be a non-empty list of integer exponents, got {poly!r}")
    if sorted(set(poly), reverse=True) != list(poly):
        raise ParamError(src, "poly", f"exponents must be distinct and in decreasing order, got {poly!r}")
    if poly[0] != m:
        raise ParamError(src, "poly", f"the first exponent must be m = {m}, got {poly[0]}")
    if poly[-1] != 0:
        raise ParamError(src, "poly", f"must contain the constant term 0 (an irreducible polynomial of degree > 1 has one), got {poly!r}")
    if len(poly) > 2 and poly[1] > m // 2:
        raise ParamError(
            src, "poly",
            f"the second-highest exponent must be at most m/2 = {m // 2} so that two folds reduce any product, "
            f"got {poly[1]} (the reciprocal polynomial, exponents m - e, is irreducible too and may qualify)")
    if not is_irreducible(poly):
        raise ParamError(src, "poly", f"{_poly_text(poly)} is reducible over GF(2); the field polynomial must be irreducible")
    return Gf2mParams(name, m, tuple(poly), isa, prefix, src)


def _poly_text(poly) -> str:
    return " + ".join("1" if e == 0 else "x" if e == 1 else f"x^{e}" for e in poly)


def load(path: str | Path, policy: str | None = None, prefix: str | None = None,
         reducer: str | None = None) -> Params:
    path = Path(path)
    src = str(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ParamError(src, "file", f"cannot be read: {e.strerror}") from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ParamError(src, "file", f"is not valid TOML: {e}") from None
    return from_mapping(table, src, policy=policy, prefix=prefix, reducer=reducer)
