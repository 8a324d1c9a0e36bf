"""Rendering a bundle to files: NAME.asm, NAME.h, manifest.json.

Templates own the file frame and ABI boilerplate, the printer owns instruction
syntax. Files are staged in a temporary directory and moved into place only
when every one of them rendered, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jinja2

from . import __version__
from .family import Bundle, Function
from .isa.abi import GPR_NAMES, SYSV, Abi
from .isa.printer import body_text

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,
)

_DIRECTIVES = {1: ("db", 16), 2: ("dw", 16), 4: ("dd", 8), 8: ("dq", 4)}


@dataclass(frozen=True)
class Frame:
    pushes: tuple[str, ...]
    stack_bytes: int
    vzeroupper: bool


def frame_of(fn: Function, abi: Abi) -> Frame:
    used = {op.number for ins in fn.kernel.body for op in ins.operands
            if getattr(op, "kind", None) == "gpr"}
    pushes = tuple(GPR_NAMES[r] for r in sorted(used) if r in abi.callee_saved_gprs)
    return Frame(pushes, 32 * fn.kernel.spill_slots, fn.kernel.uses_avx)


def _frame_lines(macro: str, frame: Frame) -> list[str]:
    text = getattr(_ENV.get_template("frame.j2").module, macro)(frame)
    return [line for line in str(text).splitlines() if line.strip()]


def _clobbers(fn: Function) -> str:
    vec = sorted({op.number for ins in fn.kernel.body for op in ins.operands if getattr(op, "kind", None) == "vec"})
    gpr = sorted({op.number for ins in fn.kernel.body for op in ins.operands if getattr(op, "kind", None) == "gpr"})
    parts = []
    if vec:
        parts.append(("ymm" if fn.kernel.uses_avx else "xmm") + _ranges(vec))
    parts += [GPR_NAMES[r] for r in gpr if r not in SYSV.callee_saved_gprs]
    parts.append("flags")
    return ", ".join(parts)


def _ranges(nums: list[int]) -> str:
    out, start, prev = [], nums[0], nums[0]
    for x in nums[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return "{" + ",".join(out) + "}" if len(out) > 1 or "-" in out[0] else out[0]


def _table_rows(values: tuple[int, ...], elem_bytes: int) -> tuple[str, list[str]]:
    directive, per_row = _DIRECTIVES[elem_bytes]
    mask = (1 << (8 * elem_bytes)) - 1
    rows = []
    for i in range(0, len(values), per_row):
        chunk = values[i:i + per_row]
        if elem_bytes == 8:
            rows.append(", ".join(f"0x{v & mask:016x}" for v in chunk))
        else:
            rows.append(", ".join(str(v) for v in chunk))
    return directive, rows


def render(bundle: Bundle, command: str, abi: Abi = SYSV) -> dict[str, str]:
    """All files of the bundle, by name, as text (manifest last: it hashes the others)."""
    tables = {}
    for fn in bundle.functions:
        for t in fn.kernel.tables:
            old = tables.get(t.label)
            if old is not None and old.values != t.values:
                raise ValueError(f"two kernels define table {t.label} differently")
            tables[t.label] = t
    table_ctx = []
    for t in sorted(tables.values(), key=lambda t: t.label):
        directive, rows = _table_rows(t.values, t.elem_bytes)
        table_ctx.append({"label": t.label, "directive": directive, "rows": rows, "comment": t.comment})
    fn_ctx = []
    for fn in bundle.functions:
        frame = frame_of(fn, abi)
        fn_ctx.append({
            "symbol": fn.kernel.symbol,
            "summary": fn.summary,
            "contract": fn.contract,
            "schedule": fn.schedule,
            "clobbers": _clobbers(fn),
            "prologue": _frame_lines("prologue", frame),
            "body": body_text(fn.kernel.body, abi),
            "epilogue": _frame_lines("epilogue", frame),
            "c_args": ", ".join(_c_arg(a) for a in fn.kernel.args),
            "arg_notes": [f"{a.name}: {a.count} x {a.ctype}, {a.role}, {a.align}-byte aligned" for a in fn.kernel.args],
        })
    params_lines = [f"{k} = {json.dumps(v)}" for k, v in bundle.params_manifest.items()]
    common = {"version": __version__, "command": command, "name": bundle.name,
              "family": bundle.params.family}
    asm = _ENV.get_template("asm.j2").render(
        **common, param_lines=params_lines, notes=bundle.notes, abi=abi.name,
        tables=table_ctx, functions=fn_ctx)
    guard = "KERNGEN_" + "".join(c if c.isalnum() else "_" for c in bundle.name.upper()) + "_H"
    header = _ENV.get_template("header.j2").render(
        **common, title=_title(bundle), guard=guard, functions=fn_ctx)
    files = {f"{bundle.name}.asm": asm, f"{bundle.name}.h": header}
    manifest = {
        "generator": {"name": "kerngen", "version": __version__},
        "command": command,
        "params": bundle.params_manifest,
        "abi": abi.name,
        "files": {name: hashlib.sha256(text.encode()).hexdigest() for name, text in files.items()},
        "functions": [_manifest_entry(fn) for fn in bundle.functions],
    }
    files["manifest.json"] = json.dumps(manifest, indent=2) + "\n"
    return files


def _title(bundle: Bundle) -> str:
    p = bundle.params
    if p.family == "ntt":
        return f"negacyclic NTT kernels over Z_{p.q}[x]/(x^{p.n}+1), {p.width}-bit lanes, {p.isa}"
    return f"GF(2^{p.m}) arithmetic, f = " + " + ".join(f"x^{e}" if e > 1 else ("x" if e else "1") for e in p.poly)


def _c_arg(a) -> str:
    const = "const " if a.role == "in" else ""
    return f"{const}{a.ctype} {a.name}[{a.count}]"


def _manifest_entry(fn: Function) -> dict:
    entry = {"symbol": fn.kernel.symbol, "kind": fn.kind, "isa": fn.isa, "dtype": fn.dtype}
    entry.update(fn.manifest)
    entry["args"] = [{"name": a.name, "role": a.role, "count": a.count, "align": a.align}
                     for a in fn.kernel.args]
    return {k: entry[k] for k in _order(entry)}


def _order(entry: dict) -> list[str]:
    first = ["symbol", "kind", "isa", "dtype", "n", "q", "m", "poly", "args", "input", "output"]
    return [k for k in first if k in entry] + [k for k in entry if k not in first]


def write(files: dict[str, str], out: Path) -> list[Path]:
    """Write every file or none: stage in a sibling temporary directory, then move."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, text in files.items():
            (stage / name).write_text(text)
        if not out.exists():
            os.replace(stage, out)
            return [out / name for name in files]
        for name in files:
            os.replace(stage / name, out / name)
        return [out / name for name in files]
    finally:
        shutil.rmtree(stage, ignore_errors=True)
