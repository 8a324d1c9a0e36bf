"""The scalar ISA: 64-bit lanes on general registers.

The builders write the same 256-bit vectors as for AVX2; legalisation puts
each lane on a general register of its own, so the kernels compute what
their AVX2 twins do, in the same NTT domain, with `mulx` (rdx reserved for
it), `imul` and a compare with a conditional move. Here: the parameters,
the instructions and registers the kernels use, an argument arriving in rdx
moved at entry, general registers spilled and reloaded, a tampered product
refused, and whole bundles against SymPy on System V and (under Wine) Win64.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest

from kerngen.commands.test import test_bundle as run_bundle_test, test_params as run_kerngen_test
from kerngen.errors import AllocationError, ParamError, VerifyError
from kerngen.families import build_all, from_mapping
from kerngen.families.ntt.build import build
from kerngen.harness import wine
from kerngen.ir.instr import ArgBase, GReg, Instr, Mem, PhysReg, StackBase
from kerngen.machine.ops import spec
from kerngen.passes.allocate import RegisterPools, allocate
from kerngen.passes.verify import verify_kernel
from kerngen.emission.frame import frame_of
from kerngen.emission.files import write
from kerngen.emission.render import render

Q62 = 4611686018326724609  # NFLlib's 62-bit prime
Q50 = 1125899906826241
RDX, RAX = 2, 0


def _params(n: int, q: int, **keys):
    return from_mapping({"name": f"s{n}-{q}", "family": "ntt", "n": n, "q": q, "width": 64, **keys}, "test")


@pytest.fixture(scope="module")
def both():
    return build(_params(16, Q62, isa=["avx2", "scalar"]))


def _scalar(bundle):
    return [f for f in bundle.functions if f.isa == "scalar"]


def test_the_scalar_isa_needs_64_bit_lanes():
    for width, q in ((16, 3329), (32, 8380417)):
        with pytest.raises(ParamError, match=r"isa.*needs width = 64"):
            from_mapping({"name": "s", "family": "ntt", "n": 256, "q": q, "width": width, "isa": "scalar"}, "test")
    with pytest.raises(ParamError, match="isa"):
        from_mapping({"name": "g", "family": "gf2m", "m": 233, "isa": "scalar"}, "test")


def test_lanes_live_on_general_registers(both):
    """No vector register, rdx never allocated, products by mulx and imul, BMI2 the one extension."""
    functions = _scalar(both)
    assert {f.kind for f in functions} >= {"ntt_forward", "ntt_inverse", "basemul", "mulmod_shoup", "freeze"}
    for f in functions:
        regs = [op for ins in f.kernel.body for op in ins.operands if isinstance(op, PhysReg)]
        assert regs and all(r.kind == "gpr" and r.number != RDX for r in regs), f.symbol
        assert all(spec(ins.op).gpr_only for ins in f.kernel.body), f.symbol
    fwd = next(f for f in functions if f.kind == "ntt_forward")
    ops = {ins.op for ins in fwd.kernel.body}
    assert {"mulx64", "imul64", "cmovb64"} <= ops
    assert fwd.kernel.extensions == frozenset({"BMI2"})
    assert fwd.manifest()["cpu"] == ["bmi2"]


def test_the_scalar_kernels_share_the_avx2_domain(both):
    """The same tables of positions: one NTT domain, whichever kernel runs."""
    by_kind = {(f.kind, f.isa): f for f in both.functions}
    for kind in ("ntt_forward", "ntt_inverse"):
        avx2, scalar = by_kind[(kind, "avx2")], by_kind[(kind, "scalar")]
        assert avx2.contract.arg("a").ensures == scalar.contract.arg("a").ensures


def test_an_argument_arriving_in_rdx_is_moved_at_entry(both):
    """mulmod_shoup(r, a, w, wp): w arrives in rdx (System V), lives in rax."""
    f = next(f for f in _scalar(both) if f.kind == "mulmod_shoup")
    abi = f.kernel.target.abi
    assert abi.arg_registers[2] == RDX and abi.arg_home(2) == RAX
    assert frame_of(f.kernel).entry_moves == (("rax", "rdx"),)
    assert RAX not in abi.scratch_gprs(4) and RDX not in abi.scratch_gprs(4)
    asm = render(both, "test")[f"{both.name}.asm"]
    entry = asm[asm.index(f"{f.symbol}:\n"):]
    assert "mov rax, rdx" in entry[:entry.index("mulx")]


def _run(body: tuple[Instr, ...], values: dict) -> dict:
    """An allocated general-register body on integers: registers and stack slots by number and offset."""
    regs: dict[int, int] = {}
    stack: dict[int, int] = {}

    def read(op):
        if isinstance(op, PhysReg):
            return regs[op.number]
        assert isinstance(op, Mem) and isinstance(op.base, StackBase)
        return stack[op.offset]

    for ins in body:
        ops = ins.operands
        if ins.op == "mov_store":
            stack[ops[0].offset] = read(ops[1])
        elif ins.comment in values:  # an input, as if loaded
            regs[ops[0].number] = values[ins.comment]
        elif ins.op in ("mov", "load64_gpr"):
            regs[ops[0].number] = read(ops[1])
        else:
            regs[ops[0].number] = spec(ins.op).arith.exact((read(ops[1]), read(ops[2])), 64)
    return regs


def test_general_registers_spill_and_reload():
    """Eight live values on three registers: spilled to the stack, reloaded or
    folded, and the sum still right; where spilling is not allowed, an error."""
    vals = [GReg(k) for k in range(8)]
    body = [Instr("mov", (v, Mem(ArgBase(0), 8 * k, 8)), f"v{k}") for k, v in enumerate(vals)]
    total = vals[0]
    for k, v in enumerate(vals[1:]):
        s = GReg(100 + k)
        body.append(Instr("add64", (s, total, v)))
        total = s
    with pytest.raises(AllocationError, match="spill"):
        allocate(body, RegisterPools(vector=(), gpr=(0, 1, 3)))
    result = allocate(body, RegisterPools(vector=(), gpr=(0, 1, 3), spill_gprs=True))
    ops = [ins.op for ins in result.body]
    assert "mov_store" in ops and result.spill_slots >= 1
    assert any(isinstance(op, Mem) and op.base == StackBase() for ins in result.body if ins.op == "add64"
               for op in ins.operands)  # a spilled value folded into its reader
    values = {f"v{k}": 3 ** k for k in range(8)}
    out = _run(result.body, values)
    assert out[result.body[-1].operands[0].number] == sum(values.values())


def test_a_tampered_scalar_product_is_refused(both):
    """The quotient's mulx reading w instead of w': no Shoup product."""
    fwd = next(f for f in _scalar(both) if f.kind == "ntt_forward")
    body = list(fwd.kernel.body)
    at = next(i for i, ins in enumerate(body) if ins.op == "mulx64")
    w = next(ins.operands[2] for ins in body[at:] if ins.op == "imul64" and isinstance(ins.operands[2], Mem))
    body[at] = dataclasses.replace(body[at], operands=body[at].operands[:2] + (w,))
    mutant = dataclasses.replace(fwd.kernel, body=tuple(body))
    verify_kernel(fwd.kernel, {0: (0, Q62 - 1)}, Q62, signed=False)
    with pytest.raises(VerifyError, match="Shoup product"):
        verify_kernel(mutant, {0: (0, Q62 - 1)}, Q62, signed=False)


@pytest.mark.parametrize("n, q, keys", [
    (32, Q50, {}),
    (16, Q62, {"basemul_acc": [2, 8], "output": "canonical"}),
])
def test_scalar_bundles_pass_against_sympy(n, q, keys):
    outcome = run_kerngen_test(_params(n, q, isa=["scalar", "avx2"], **keys), seed=5, say=lambda s: None)
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 60


@pytest.mark.skipif(bool([t for t in wine.missing_tools() if not t.startswith("nasm")]),
                    reason="the Win64 harness runs under Wine with MinGW-w64")
def test_a_scalar_bundle_passes_under_wine():
    """Win64 passes w in r8 and wp in r9, a in rdx: a moved to rax at entry."""
    p = _params(16, Q62, isa="scalar", abi="win64")
    files = render(build_all(p), "test")
    with tempfile.TemporaryDirectory(prefix="kg-scalar-") as tmp:
        work = Path(tmp)
        try:
            write(files, work / p.name)
            said: list[str] = []
            outcome = run_bundle_test(work / p.name, 3, said.append, work, reemit=False)
        finally:
            wine.stop_wineserver(work)
    assert any("Wine" in line for line in said), said
    assert outcome.failed == 0, outcome.failures
    assert outcome.passed >= 40
