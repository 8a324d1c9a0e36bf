"""Arrays checked against a function's manifest entry before a call: the
arguments given (by position or by name), type, dtype, per-call length,
contiguity, alignment, the batch shape, aliasing and the input contract
(bounds, and companions such as Shoup's w'). Every refusal names the
function, the argument and the rule it breaks."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from ..core.manifest import ArgumentEntry, FunctionEntry, Values

WRITTEN = ("out", "inout")
READ = ("in", "inout")
LIMB_BITS = 64  # a multi-limb element is little-endian uint64 limbs


@dataclass(frozen=True)
class Call:
    """What the batch loop takes: each argument's address and stride in bytes, and the number of calls."""

    pointers: tuple[int, ...]
    strides: tuple[int, ...]
    count: int


def _where(fn: FunctionEntry, arg: ArgumentEntry) -> str:
    return f"{fn.symbol}: argument {arg.name!r}"


def check_array(fn: FunctionEntry, arg: ArgumentEntry, value: object) -> np.ndarray:
    """`value` if it is an array this argument takes, one call or a batch of them."""
    where = _where(fn, arg)
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{where}: must be a numpy array of {fn.dtype}, got {type(value).__name__}")
    if value.dtype != np.dtype(fn.dtype):
        raise TypeError(f"{where}: must be of dtype {fn.dtype}, got {value.dtype} (convert with "
                        f".astype(np.{fn.dtype}) after checking the values fit)")
    if value.ndim == 0 or value.shape[-1] != arg.count:
        raise ValueError(f"{where}: each call takes {arg.count} elements (the last axis), got shape {value.shape}")
    if not value.flags.c_contiguous:
        raise ValueError(f"{where}: must be C-contiguous, got a strided view; pass np.ascontiguousarray(x) and "
                         "read the results from that copy")
    if arg.role in WRITTEN and not value.flags.writeable:
        raise ValueError(f"{where}: is written ({arg.role}) but the array is read-only")
    if value.ctypes.data % arg.align:
        raise ValueError(f"{where}: must be aligned to {arg.align} bytes, got address {value.ctypes.data:#x}")
    return value


def batch_shape(fn: FunctionEntry, arrays: dict[str, np.ndarray]) -> tuple[int, ...]:
    """The leading shape the calls run over: every argument's leading shape is
    that shape, or () for one row passed to every call (inputs only)."""
    leading = {name: a.shape[:-1] for name, a in arrays.items()}
    shapes = {s for s in leading.values() if s}
    if len(shapes) > 1:
        raise ValueError(f"{fn.symbol}: the arguments' leading (batch) shapes differ: "
                         + ", ".join(f"{n} {s}" for n, s in leading.items())
                         + "; give each the same leading shape, or none (one row for every call)")
    shape = shapes.pop() if shapes else ()
    for arg in fn.args:
        if arg.role in WRITTEN and shape and leading[arg.name] != shape:
            raise ValueError(f"{_where(fn, arg)}: is written, so it needs its own row for each call: leading shape "
                             f"{shape}, got {leading[arg.name]}")
    return shape


def check_aliasing(fn: FunctionEntry, arrays: dict[str, np.ndarray]) -> None:
    """A written argument shares no memory with another one, but for the
    arguments its manifest entry says it may be (`may_alias`), and then only
    as the very same array."""
    for arg in fn.args:
        if arg.role not in WRITTEN:
            continue
        mine = arrays[arg.name]
        for other in fn.args:
            theirs = arrays[other.name]
            if other.name == arg.name or not np.may_share_memory(mine, theirs):
                continue
            same = mine.ctypes.data == theirs.ctypes.data and mine.shape == theirs.shape
            if not (same and other.name in arg.may_alias):
                allowed = f"it may be the same array as {', '.join(arg.may_alias)} only" if arg.may_alias else \
                    "it may be no other argument"
                raise ValueError(f"{_where(fn, arg)}: overlaps argument {other.name!r}; {allowed}: pass a "
                                 "separate array")


def requires(fn: FunctionEntry, arg: ArgumentEntry) -> Values | None:
    """The input contract of `arg`: its own (none: any value), or in a
    manifest written before every input carried its own, the function's."""
    if any(a.requires is not None for a in fn.args):
        return arg.requires
    return fn.input


def check_contract(fn: FunctionEntry, arg: ArgumentEntry, value: np.ndarray) -> None:
    """Every element (every multi-limb value) of `value` within the proven input bound."""
    contract = requires(fn, arg)
    if contract is None or value.size == 0:
        return
    lo, hi = contract.bound
    if contract.limbs:
        _check_limbs(fn, arg, value, contract)
        return
    found_lo, found_hi = int(value.min()), int(value.max())
    if found_lo < lo or found_hi > hi:
        bad = found_lo if found_lo < lo else found_hi
        raise ValueError(f"{_where(fn, arg)}: holds {bad}, outside the proven input bound [{lo}, {hi}]; reduce "
                         "the inputs first, or pass check=False to skip this check (out-of-contract results are "
                         "then undefined)")


def check_companion(fn: FunctionEntry, arg: ArgumentEntry, arrays: dict[str, np.ndarray]) -> None:
    """An argument the contract derives from another one element by element
    (`Companion`: Shoup's w' = floor(w*2^bits/q)) holds exactly that."""
    contract = requires(fn, arg)
    rule = contract.companion if contract is not None else None
    if rule is None or rule.of not in arrays:
        return
    q = fn.fact("q")
    source, given = np.broadcast_arrays(arrays[rule.of], arrays[arg.name])
    values, at = np.unique(source.ravel(), return_inverse=True)  # few distinct w: a constant, a table
    wanted = np.array([rule.value(int(w), q) for w in values], dtype=given.dtype)[at].reshape(given.shape)
    wrong = np.flatnonzero(wanted != given)
    if wrong.size:
        i = np.unravel_index(wrong[0], given.shape)
        element = i[0] if len(i) == 1 else tuple(map(int, i))
        raise ValueError(f"{_where(fn, arg)}: holds {given[i]} where {rule.of!r} holds {source[i]} (element "
                         f"{element}); it must be {rule.spelled()} = {wanted[i]} for q = {q} (the manifest's "
                         f"representation of {arg.name}): compute it from {rule.of}, or pass check=False to skip "
                         "this check (results are then undefined)")


def _check_limbs(fn: FunctionEntry, arg: ArgumentEntry, value: np.ndarray, contract: Values) -> None:
    """Multi-limb elements bounded by [0, 2^bits - 1]: the limbs above `bits` are zero."""
    lo, hi = contract.bound
    bits = (hi + 1).bit_length() - 1
    if lo != 0 or hi + 1 != 1 << bits:
        raise ValueError(f"{_where(fn, arg)}: a bound of [{lo}, {hi}] on {contract.limbs} limbs cannot be checked "
                         "limb by limb; pass check=False")
    rows = value.reshape(-1, value.shape[-1] // contract.limbs, contract.limbs)
    for limb in range(contract.limbs):
        free = bits - LIMB_BITS * limb
        if free >= LIMB_BITS:
            continue
        top = rows[..., limb]
        if (top >> np.uint64(max(free, 0))).any() if free > 0 else top.any():
            raise ValueError(f"{_where(fn, arg)}: a value has bits at or above bit {bits}, outside the proven "
                             f"input bound [0, 2^{bits} - 1]; reduce it first, or pass check=False")


def by_name(fn: FunctionEntry, values: tuple[object, ...], named: dict[str, object]) -> dict[str, object]:
    """The values of a call by argument name, in the manifest's order: those
    given by position first, then those given by the manifest's names."""
    names = [a.name for a in fn.args]
    signature = f"{fn.symbol}: takes {len(names)} arrays ({', '.join(names)})"
    if len(values) > len(names):
        raise TypeError(f"{signature}, got {len(values)}")
    given = dict(zip(names, values))
    for name, value in named.items():
        if name not in names:
            raise TypeError(f"{signature}; it has no argument {name!r}")
        if name in given:
            raise TypeError(f"{signature}; {name!r} is given twice, by position and by name")
        given[name] = value
    missing = [name for name in names if name not in given]
    if missing:
        raise TypeError(f"{signature}; missing {', '.join(map(repr, missing))}")
    return {name: given[name] for name in names}


def prepare(fn: FunctionEntry, values: tuple[object, ...], named: dict[str, object], check: bool) -> Call:
    """The checked call of `fn` on `values` (by position, in the manifest's
    order) and `named` (by the manifest's argument names)."""
    arrays = {arg.name: check_array(fn, arg, v) for arg, v in zip(fn.args, by_name(fn, values, named).values())}
    shape = batch_shape(fn, arrays)
    check_aliasing(fn, arrays)
    if check:
        read = [arg for arg in fn.args if arg.role in READ]
        for arg in read:
            check_contract(fn, arg, arrays[arg.name])
        for arg in read:  # after every bound: a companion's source is then in range
            check_companion(fn, arg, arrays)
    strides = tuple(a.shape[-1] * a.itemsize if a.ndim > 1 else 0 for a in arrays.values())
    return Call(tuple(a.ctypes.data for a in arrays.values()), strides, prod(shape))
