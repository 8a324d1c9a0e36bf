"""Mutation testing of the NTT kernels: wrong kernels must not get through.

A mutant is made inside the real build: the builder of one kernel is changed
(a constant-table entry, a twiddle with its companion kept consistent, an
addition turned into a subtraction, a shuffle's immediate, a reduction
dropped, q itself) just before it enters the passes, so it is allocated,
verified and emitted like any kernel. Then:

- rejected: the build refuses it (verifier, map proof, checks), or the
  renderer does (a proven contract that is not its other ISAs' twins');
- caught: `kerngen test` of the emitted bundle fails (sampled checks,
  round trips, basis-vector proofs and sweeps; the comparison with what the
  parameters give is left out, as for a bundle another kerngen version wrote:
  a mutant stands for a generator bug, which a fresh emission would repeat);
- harmless or wrong: it passes both; an oracle then runs it beside the
  unmutated kernel on random and extreme inputs of the contract — a mutant
  whose outputs leave the original bound or are not congruent to the
  original's is wrong.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kerngen.commands.test import test_bundle
from kerngen.errors import KerngenError
from kerngen.core.compile_cache import CompileCache
from kerngen.families.ntt import build as ntt_build
from kerngen.harness import protocol, toolchain
from kerngen.ir.instr import Imm, Instr, Mem, TableBase
from kerngen.machine.ops import spec
from kerngen.emission.files import write
from kerngen.emission.render import render

OPERATORS = ("table", "pair", "swap", "imm", "drop", "modulus")


@dataclass(frozen=True)
class Outcome:
    what: str
    verdict: str  # "rejected", "caught", "harmless", "wrong", "inapplicable"
    detail: str = ""


def _groups(instrs: list[Instr], kind: str | None = None) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, ins in enumerate(instrs):
        if ins.idiom is not None and (kind is None or (ins.idiom.kind == "montgomery") == (kind == "montgomery")):
            out.setdefault(ins.idiom.group, []).append(i)
    return out


def _own(b, label: str) -> str:
    """The table `label` under a name of the mutant's own (constants are shared
    between kernels by name: a changed copy must not meet the others)."""
    own = f"{label}_mutant"
    b.tables[own] = dataclasses.replace(b.tables.pop(label), label=own)
    b.instrs[:] = [dataclasses.replace(ins, operands=tuple(
        dataclasses.replace(op, base=TableBase(own)) if isinstance(op, Mem) and isinstance(op.base, TableBase)
        and op.base.label == label else op for op in ins.operands)) for ins in b.instrs]
    return own


def mutate(b, operator: str, rng: random.Random, q: int) -> str | None:
    """Change the builder in place; say what was changed (None: nothing to change)."""
    instrs, tables = b.instrs, b.tables
    if operator == "table":
        label = _own(b, rng.choice(sorted(tables)))
        t = tables[label]
        k = rng.randrange(len(t.values))
        delta = rng.choice((-1, 1))
        values = list(t.values)
        values[k] += delta
        tables[label] = dataclasses.replace(t, values=tuple(values))
        return f"{label}[{k}] {delta:+d}"
    if operator == "pair":  # a twiddle and its companion, changed consistently: linear, but the wrong twiddle
        def table_operands(idx: list[int]) -> list[Mem]:  # w' is read first, then w (any lane width)
            return [op for i in idx for op in instrs[i].operands if isinstance(op, Mem) and
                    isinstance(op.base, TableBase) and op.base.label in tables]

        products = [table_operands(idx) for idx in _groups(instrs, "montgomery").values()]
        products = [mems for mems in products if len(mems) >= 2]
        if not products:
            return None
        wq_mem, w_mem = rng.choice(products)[:2]
        _own(b, w_mem.base.label)
        if wq_mem.base.label != w_mem.base.label:
            _own(b, wq_mem.base.label)
        tw, tq = tables[w_mem.base.label + "_mutant"], tables[wq_mem.base.label + "_mutant"]
        bits = 8 * tw.elem_bytes
        lane = rng.randrange(w_mem.size // tw.elem_bytes)
        kw, kq = w_mem.offset // tw.elem_bytes + lane, wq_mem.offset // tq.elem_bytes + lane
        w = tw.values[kw] + 1
        wq = (w * pow(q, -1, 1 << bits)) % (1 << bits)
        wq -= (1 << bits) if wq >= 1 << (bits - 1) else 0
        vw, vq = list(tw.values), list(tq.values)
        vw[kw] = w
        if tw.label == tq.label:
            vw[kq] = wq
            tables[tw.label] = dataclasses.replace(tw, values=tuple(vw))
        else:
            vq[kq] = wq
            tables[tw.label] = dataclasses.replace(tw, values=tuple(vw))
            tables[tq.label] = dataclasses.replace(tq, values=tuple(vq))
        return f"twiddle {tw.label}[{kw}] +1 with its companion"
    if operator == "swap":
        cands = [i for i, ins in enumerate(instrs) if ins.idiom is None and spec(ins.op).generic in ("add", "sub")]
        if not cands:
            return None
        i = rng.choice(cands)
        ins = instrs[i]
        other = spec(ins.op).name.replace("add", "SUB").replace("sub", "add").replace("SUB", "sub")
        instrs[i] = dataclasses.replace(ins, op=other)
        return f"instruction {i} {ins.op} -> {other}"
    if operator == "imm":
        cands = [i for i, ins in enumerate(instrs) if ins.idiom is None and isinstance(ins.operands[-1], Imm)
                 and spec(ins.op).cls == "shuffle"]
        if not cands:
            return None
        i = rng.choice(cands)
        ins = instrs[i]
        old = ins.operands[-1].value
        new = old ^ (1 << rng.randrange(max(1, old.bit_length())))
        instrs[i] = dataclasses.replace(ins, operands=ins.operands[:-1] + (Imm(new),))
        return f"instruction {i} {ins.op} immediate {old} -> {new}"
    if operator == "drop":  # a reduction removed: its result is its input
        idioms = [idx for idx in _groups(instrs).values() if instrs[idx[0]].idiom.kind != "montgomery"]
        if not idioms:
            return None
        idx = rng.choice(idioms)
        source = instrs[idx[0]].operands[instrs[idx[0]].idiom.source]
        result = instrs[idx[-1]].operands[0]
        keep = [ins for k, ins in enumerate(instrs) if k not in set(idx)]
        instrs[:] = [dataclasses.replace(ins, operands=tuple(source if op == result else op for op in ins.operands))
                     for ins in keep]
        return f"reduction at instruction {idx[0]} dropped"
    if operator == "modulus":
        label = next((lab for lab, t in tables.items() if set(t.values) == {q}), None)
        if label is None:
            return None
        label = _own(b, label)
        t = tables[label]
        tables[label] = dataclasses.replace(t, values=(q + 2,) * len(t.values))
        return f"{label}: q -> q + 2"
    raise ValueError(operator)


def run_mutant(p, symbol: str, operator: str, seed: int, work: Path, original, cache: CompileCache) -> Outcome:
    """Build `p` with one mutation in the kernel `symbol` — every ISA of `p`,
    so that a mutant of a second ISA is judged beside its first, as a user's
    bundle is (the mutant's tables take labels of their own: `_own`) — and
    judge the result. The kernels left alone come from `cache` (the original's
    compilations)."""
    said: list[str] = []
    compile_ = ntt_build._compile

    def mutated(b, sym, contract, params, target, *how, **more):
        if sym == symbol:  # every build of it (base multiplication may be built twice), the same way
            what = mutate(b, operator, random.Random(seed), params.q)
            said.append(what or "")
        return compile_(b, sym, contract, params, target, *how, **more)

    ntt_build._compile = mutated
    try:
        bundle = ntt_build.build(p, cache)
    except KerngenError as e:
        return Outcome(said[0] if said else operator, "rejected" if said and said[0] else "inapplicable", str(e)[:120])
    finally:
        ntt_build._compile = compile_
    what = said[0] if said else ""
    if not what:
        return Outcome(operator, "inapplicable")
    out = work / f"m{seed}-{operator}"
    try:
        write(render(bundle, "mutant"), out)
    except ValueError as e:  # e.g. a mutant whose proven contract is not its twin's: no dispatch unit, no bundle
        return Outcome(what, "rejected", str(e)[:120])
    outcome = test_bundle(out, seed, lambda s: None, work, reemit=False)
    if outcome.failed:
        return Outcome(what, "caught", outcome.failures[0][:120])
    wrong = oracle(original, out, bundle, symbol, work, seed)
    return Outcome(what, "wrong" if wrong else "harmless", wrong or "")


def oracle(original: Path, mutant: Path, bundle, symbol: str, work: Path, seed: int) -> str | None:
    """The mutant beside the original on random and extreme inputs of the
    original contract: None when every output is congruent to the original's
    and inside the original bound."""
    import json

    base = json.loads((original / "manifest.json").read_text())
    fn = next(f for f in base["functions"] if f["symbol"] == symbol)
    q = base["params"]["q"]
    lo, hi = fn["input"]["bound"]
    rng = np.random.default_rng(seed)
    ins = [i for i, a in enumerate(fn["args"]) if a["role"] != "out"]
    count = fn["args"][ins[0]]["count"]
    rows = np.concatenate([rng.integers(lo, hi + 1, size=(256, count)),
                           np.full((1, count), hi), np.full((1, count), lo),
                           np.tile([hi, lo], (1, count // 2 + 1))[:, :count]])
    inputs = {i: np.roll(rows, k, axis=0) for k, i in enumerate(ins)}
    libs = [toolchain.assemble_shared(d / f"{base['params']['name']}.asm", work) for d in (original, mutant)]
    out = [protocol.run_batch(lib, symbol, fn["args"], fn["dtype"], inputs, work) for lib in libs]
    for k in out[0]:
        a, b = out[0][k], out[1][k]
        if np.any((a - b) % q):
            r, e = np.argwhere((a - b) % q)[0]
            return f"input {r}: element {e} is {b[r, e]}, not congruent to {a[r, e]}"
        olo, ohi = fn["output"]["bound"]
        if np.any(b < olo) or np.any(b > ohi):
            return f"an output leaves the bound [{olo}, {ohi}]"
    return None


# ---------------------------------------------------------------------------
# mutants of a copied bundle: its .asm edited as text, the manifest's hash fixed up


def kernel_lines(asm: str, symbol: str) -> range:
    """The line numbers of `symbol`'s body in an .asm text (up to the next global label)."""
    lines = asm.split("\n")
    start = lines.index(f"{symbol}:") + 1
    end = next((i for i in range(start, len(lines)) if lines[i] and not lines[i][0].isspace()
                and lines[i].endswith(":") and not lines[i].startswith(".")), len(lines))
    return range(start, end)


def instruction_mutants(asm: str, symbol: str, mnemonic: str, replacement: str | None, start: float = 0):
    """(text, what) of each `mnemonic` instruction of `symbol` in turn, from
    the fraction `start` of them on: deleted (`replacement` None) or given
    another mnemonic with the same operands."""
    lines = asm.split("\n")
    found = [i for i in kernel_lines(asm, symbol) if lines[i].split()[:1] == [mnemonic]]
    for k in range(int(start * len(found)), len(found)):
        i = found[k]
        what = f"{symbol}: {mnemonic} #{k} ({lines[i].split(';')[0].strip()})"
        if replacement is None:
            yield "\n".join(lines[:i] + lines[i + 1:]), what + " deleted"
        else:
            yield "\n".join(lines[:i] + [lines[i].replace(mnemonic, replacement, 1)] + lines[i + 1:]), \
                what + f" -> {replacement}"


def table_entries(asm: str, label: str) -> tuple[int, int, list[int]]:
    """(first line, values per line, values) of the table `label` in an .asm text."""
    lines = asm.split("\n")
    start = lines.index(f"{label}:") + 1
    rows = []
    for line in lines[start:]:
        words = line.split(None, 1)
        if len(words) != 2 or words[0] not in ("dw", "dd", "dq"):
            break
        rows.append([int(v, 0) for v in words[1].split(",")])
    return start, len(rows[0]), [v for row in rows for v in row]


def shoup_quotient_entries(asm: str, label: str, q: int, bits: int) -> list[int]:
    """The entries of a twiddle table that are Shoup's w' = floor(w*2^bits/q)
    of the entry one row (of `per` values) above them, w in [1, q)."""
    _, per, values = table_entries(asm, label)
    return [k for k in range(per, len(values))
            if 0 < values[k - per] < q and values[k] == (values[k - per] << bits) // q]


def table_entry_mutant(asm: str, label: str, k: int, delta: int) -> tuple[str, str]:
    """Entry k of the table `label` changed by `delta`: (text, what)."""
    start, per, values = table_entries(asm, label)
    lines = asm.split("\n")
    row, col = divmod(k, per)
    directive, cells = lines[start + row].split(None, 1)
    cells = [c.strip() for c in cells.split(",")]
    cells[col] = str(int(cells[col], 0) + delta)
    lines[start + row] = f"    {directive} {', '.join(cells)}"
    return "\n".join(lines), f"{label}[{k}] {delta:+d}"


def copied_with(bundle: Path, changed: dict[str, str], out: Path) -> Path:
    """A copy of `bundle` with the files in `changed` replaced and their
    sha256 fixed up in its manifest, as one who edits a copied bundle would."""
    import hashlib
    import json
    import shutil

    shutil.copytree(bundle, out)
    manifest = json.loads((out / "manifest.json").read_text())
    for name, text in changed.items():
        (out / name).write_text(text)
        manifest["files"][name] = hashlib.sha256(text.encode()).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return out


def escaping_mutants(bundle: Path, symbol: str, candidates, work: Path, seed: int, wanted: int) -> list[tuple[str, str]]:
    """The first `wanted` of the (text, what) `candidates` of `bundle`'s .asm
    that unit vectors alone pass (the basis-vector proof of the NTT `symbol`,
    all that a second ISA's NTT was once checked with) and that are wrong
    (`oracle`: beside the original on random and extreme inputs of its contract)."""
    import json

    from kerngen.families.ntt.checks import _mismatches
    from kerngen.families.ntt.reference import lagrange_images, unit_images

    manifest = json.loads((bundle / "manifest.json").read_text())
    name, n, q = manifest["params"]["name"], manifest["params"]["n"], manifest["params"]["q"]
    fn = next(f for f in manifest["functions"] if f["symbol"] == symbol)
    layout = next(f for f in manifest["functions"] if f["kind"] == "ntt_forward")["output"]["layout"]
    images = (unit_images if fn["kind"] == "ntt_forward" else lagrange_images)(layout, n, q)
    eye = np.eye(n, dtype=np.int64)
    found = []
    for k, (text, what) in enumerate(candidates):
        candidate = work / f"candidate-{symbol}-{k}"
        candidate.mkdir(parents=True, exist_ok=True)
        (candidate / f"{name}.asm").write_text(text)
        lib = toolchain.assemble_shared(candidate / f"{name}.asm", work)
        got = protocol.run_batch(lib, symbol, fn["args"], fn["dtype"], {0: eye}, work, seed=seed)[0]
        if len(_mismatches(got, images, fn["output"]["scale"], q)):
            continue
        if oracle(bundle, candidate, None, symbol, work, seed):
            found.append((text, what))
            if len(found) == wanted:
                break
    return found
