"""The pass pipeline from a builder's instruction list to a verified kernel.

    check -> legalise -> load halves -> fold loads -> fold broadcasts -> fuse bitwise -> allocate -> promote constants
          -> check allocated -> required ISA -> verify -> roll -> point tables -> check encoding -> constant time

Roll, point tables and check encoding write the verified stream shorter
(loops, addresses through registers) and prove that it still runs exactly
that stream; the last pass proves that the body as emitted branches on, and
addresses memory by, no data (`passes.constant_time`).

Each pass is a named function over one `Unit` of work; `compile_kernel`
runs them in order. Families call nothing else: the same pipeline serves
every family, ISA and ABI, which arrive in the `Target`.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from ..core.compile_cache import CompileCache
from ..core.contract import Bound, Contract
from ..core.progress import PROGRESS_AFTER, progress
from ..errors import AllocationError, CheckError
from ..ir.instr import ArgSpec, Builder, Instr, Kernel
from ..machine.abi import RBP
from ..machine.ops import lane_range
from ..machine.registers import GENERAL, MASK, VECTOR
from ..machine.target import Target
from .allocate import RegisterPools, allocate
from .check import check_encoding, check_memory, check_operands
from .encoding import fold_broadcasts, fold_loads, point_tables, promote_constants
from .constant_time import prove_constant_time
from .fuse import fuse_bitwise
from .halves import load_halves
from .roll import roll
from .legalise import legalise
from .verify import Proof, Verification, verify_kernel


@dataclass
class Unit:
    """One kernel on its way through the passes."""

    symbol: str
    args: tuple[ArgSpec, ...]
    target: Target
    builder: Builder
    body: list[Instr]
    callee_saved: bool
    verification: Verification | None
    spill_slots: int = 0
    extensions: frozenset[str] = field(default_factory=frozenset)
    kernel: Kernel | None = None
    proof: Proof | None = None


def _check(u: Unit) -> None:
    check_operands(u.body, len(u.args), allocated=False)


def _legalise(u: Unit) -> None:
    u.body = legalise(u.body, u.target, u.builder)


def _load_halves(u: Unit) -> None:
    u.body = load_halves(u.body, u.target.isa.encoding)


def _fuse_bitwise(u: Unit) -> None:
    u.body = fuse_bitwise(u.body, u.target.isa)


def _fold_loads(u: Unit) -> None:
    """Only where the encoding's memory operands may be unaligned (not legacy
    SSE's, 16-byte aligned): arguments need not be."""
    if u.target.isa.encoding.unaligned_memory:
        u.body = fold_loads(u.body)


def _fold_broadcasts(u: Unit) -> None:
    u.body = fold_broadcasts(u.body, u.target.isa.encoding, u.target.lane_bits)


def _allocate(u: Unit) -> None:
    """callee_saved (always where the ISA's register use says so): also hand
    out the ABI's callee-saved GPRs (not rbp, the frame pointer of kernels
    with spills); the frame saves those a kernel uses. The ISA leaves the
    first scratch GPRs to the roll pass where it says so."""
    abi, use = u.target.abi, u.target.isa.register_use
    saved = abi.saved(GENERAL)
    extra = tuple(r for r in saved if r != RBP) if u.callee_saved or use.callee_saved_general else ()
    scratch = abi.scratch_gprs(len(u.args))[use.roll_general:]
    pools = RegisterPools(vector=u.target.pool(VECTOR), gpr=scratch + extra, mask=u.target.pool(MASK),
                          spill_gprs=use.spill_general, slot_bytes=u.target.isa.spill_slot_bytes)
    result = allocate(u.body, pools)
    u.body, u.spill_slots = list(result.body), result.spill_slots


def _promote_constants(u: Unit) -> None:
    u.body = promote_constants(u.body, u.target.pool(VECTOR))


def _check_allocated(u: Unit) -> None:
    check_operands(u.body, len(u.args), allocated=True)
    check_memory(tuple(u.body), u.args, tuple(u.builder.tables.values()), u.spill_slots,
                 u.target.isa.spill_slot_bytes)


def _required_isa(u: Unit) -> None:
    """The extensions the instructions need: those of the form each is
    encoded in, the ISA's encoding at its register width (avo's RequiredISAExtensions)."""
    encoding = u.target.isa.encoding
    u.extensions = frozenset().union(*(ins.form(encoding).extensions for ins in u.body))
    u.kernel = Kernel(u.symbol, u.args, tuple(u.body), tuple(u.builder.tables.values()), u.target,
                      u.extensions, u.spill_slots)


def _verify(u: Unit) -> None:
    if u.verification is not None:
        v = u.verification
        u.proof = verify_kernel(u.kernel, v.inputs, v.modulus, v.signed, v.shoup_pairs)


def _roll(u: Unit) -> None:
    u.body = roll(u.body, u.target.abi, len(u.args))


def _point_tables(u: Unit) -> None:
    u.body = point_tables(u.body, u.target.abi.scratch_gprs(len(u.args)))


def _check_encoding(u: Unit) -> None:
    verified = u.kernel.body
    if tuple(u.body) != verified:
        check_encoding(u.body, verified, u.target.abi, len(u.args))
        u.kernel = dataclasses.replace(u.kernel, body=tuple(u.body))


def _constant_time(u: Unit) -> None:
    prove_constant_time(u.body, u.target.abi, len(u.args))
    u.kernel = dataclasses.replace(u.kernel, constant_time=True)


PASSES = (
    ("check", _check),
    ("legalise", _legalise),
    ("load halves", _load_halves),
    ("fold loads", _fold_loads),
    ("fold broadcasts", _fold_broadcasts),
    ("fuse bitwise", _fuse_bitwise),
    ("allocate", _allocate),
    ("promote constants", _promote_constants),
    ("check allocated", _check_allocated),
    ("required ISA", _required_isa),
    ("verify", _verify),
    ("roll", _roll),
    ("point tables", _point_tables),
    ("check encoding", _check_encoding),
    ("constant time", _constant_time),
)


@dataclass(frozen=True)
class Compiled:
    kernel: Kernel
    contract: Contract  # with the ensures bounds the verifier proved
    proof: Proof | None  # None when no verification was asked for


def _compile_key(builder: Builder, symbol: str, contract: Contract, target: Target, *flags) -> tuple:
    """Everything the passes read: a target's instruction set, lane width and calling convention, never its
    object format or symbol visibility (a bundle emitted for System V on ELF and on Mach-O compiles each
    kernel once)."""
    return (symbol, target.isa, target.lane_bits, target.abi, contract, flags, tuple(builder.body),
            tuple(builder.tables.values()))


def compile_kernel(builder: Builder, symbol: str, contract: Contract, target: Target, modulus: int | None = None,
                   gf2: bool = False, callee_saved: bool = False, signed: bool = True,
                   shoup_pairs: tuple[tuple[int, int, int], ...] = (), cache: CompileCache | None = None) -> Compiled:
    """Run the passes. With a `modulus` (lanes mod q), the verifier proves the
    kernel for every input its contract requires and fills in what it
    ensures; with `gf2` (bit-vector lanes, nothing to overflow) it derives the
    forms and dependences only, and the contract's ensures must be given.
    `signed`: how the lanes' values are read (the contract's bounds too);
    `shoup_pairs`: (w, w', W) arguments the contract relates as w' = floor(w*2^W/q) (Shoup's products).
    A kernel the `cache` holds for a target differing only in object format
    or visibility is taken from there, on this target; without a cache the
    passes always run; a cache made `through` a pass stops there (`_dry`)."""
    if cache is None:
        return _run_passes(builder, symbol, contract, target, modulus, gf2, callee_saved, signed, shoup_pairs)
    key = _compile_key(builder, symbol, contract, target, modulus, gf2, callee_saved, signed, shoup_pairs)
    done = cache.get(key)
    if done is not None:
        return dataclasses.replace(done, kernel=dataclasses.replace(done.kernel, target=target))
    with cache.compiling():
        compiled = _run_passes(builder, symbol, contract, target, modulus, gf2, callee_saved, signed, shoup_pairs,
                               cache.through)
    cache.put(key, compiled)
    return compiled


def _run_passes(builder: Builder, symbol: str, contract: Contract, target: Target, modulus: int | None, gf2: bool,
                callee_saved: bool, signed: bool, shoup_pairs: tuple[tuple[int, int, int], ...],
                through: str | None = None) -> Compiled:
    if through is not None and through not in dict(PASSES):
        raise ValueError(f"no pass is named {through!r}")
    verification = None
    if modulus is not None or gf2:
        verification = Verification({i: (b.lo, b.hi) for i, b in contract.inputs().items()} if modulus else {},
                                    modulus, signed, shoup_pairs)
    u = Unit(symbol, contract.specs, target, builder, builder.body, callee_saved, verification)
    started = time.monotonic()
    for name, run in PASSES:
        try:
            run(u)
        except (AllocationError, CheckError) as e:
            raise type(e)(f"{symbol}: {name}: {e}") from None
        if name == through:
            return _dry(u, contract, signed if modulus is not None else None)
    if u.proof is not None and modulus is not None:
        contract = contract.proven({i: Bound(*u.proof.hull(i)) for i in u.proof.outputs})
    took = time.monotonic() - started
    if took >= PROGRESS_AFTER:
        progress.info("%s: %d instructions, %s in %.0f s", symbol, len(u.kernel.body),
                      "verified" if u.proof is not None else "allocated", took)
    return Compiled(u.kernel, contract, u.proof)


def _dry(u: Unit, contract: Contract, signed: bool | None) -> Compiled:
    """A kernel compiled no further than `u` has come: unverified, so its contract ensures no more than its
    lanes hold (`signed`: how they are read; None: no bound to state)."""
    kernel = Kernel(u.symbol, u.args, tuple(u.body), tuple(u.builder.tables.values()), u.target, frozenset(),
                    u.spill_slots)
    if signed is not None:
        lane = Bound(*lane_range(u.target.lane_bits, signed))
        contract = contract.proven({i: lane for i, a in enumerate(contract.args) if a.ensures is not None})
    return Compiled(kernel, contract, None)
