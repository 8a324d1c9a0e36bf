"""A bundle rendered to its files: NAME.asm (one per ABI: NAME_win64.asm,
NAME_macho.asm), NAME.h, NAME_dispatch.c, the vendoring files, manifest.json.

Templates own the file frame and the ABI boilerplate (reading the target's
`Abi` and `ObjectFormat`), the printer owns instruction syntax, and every
comment block, header comment and manifest entry comes from the functions'
typed contracts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from importlib.resources import files

import jinja2

from .. import LICENSE, __version__
from ..core.bundle import Bundle, CDefine, CTable, Function, manifest_params
from ..ir.instr import Kernel, shared_table
from ..ir.stream import executed
from ..machine.registers import GENERAL, GPR_NAMES, MASK, VECTOR
from .dispatch import dispatch
from .examples import length_macro
from .frame import Frame, frame_of, registers_used
from .printer import body_text
from ..machine.target import PLATFORMS
from .vendor import vendor_files

TEMPLATES = files("kerngen") / "templates"

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,
)
# C source written as code is read: block tags on their own lines leave no blank lines
_C_ENV = _ENV.overlay(trim_blocks=True, lstrip_blocks=True)

_DIRECTIVES = {1: ("db", 16), 2: ("dw", 16), 4: ("dd", 8), 8: ("dq", 4)}


def frame_lines(macro: str, frame: Frame) -> list[str]:
    text = getattr(_ENV.get_template("frame.j2").module, macro)(frame)
    return [line for line in str(text).splitlines() if line.strip()]


def _loops(kernel: Kernel) -> str:
    """What rolling made of a long kernel: its loops and how much it writes and runs."""
    found = kernel.loops
    if not found:
        return ""
    def text(count: int, length: int, inner: tuple) -> str:
        return f"{count} x {length}" + (f" (each holding {' and '.join(text(*i) for i in inner)})" if inner else "")
    each = " and ".join(text(*loop) for loop in found)
    return (f"{each} instructions (repeated groups rolled: {len(executed(kernel))} instructions run, "
            f"{len(kernel.body)} written)")


def _clobbers(fn: Function) -> str:
    """Vector registers used (all of the widest register where the encoding
    zeroes upper parts, as VEX and EVEX do; of the callee-saved ones only what
    the ABI lets a callee lose), opmasks, the caller-saved general registers
    used, and the flags."""
    k = fn.kernel
    abi, isa = k.target.abi, k.target.isa
    vec, gpr = registers_used(k, VECTOR), registers_used(k, GENERAL)
    free = [r for r in vec if r not in abi.saved(VECTOR)]
    saved = [r for r in vec if r in abi.saved(VECTOR)]
    zeroes_upper = isa.encoding.zeroes_upper
    widest = isa.family(VECTOR).prefix(isa.vector_bits) if isa.has_family(VECTOR) else ""
    parts = []
    if free:
        parts.append((widest if zeroes_upper else "xmm") + _ranges(free))
    if saved and zeroes_upper:
        parts.append(f"upper parts of {widest}" + _ranges(saved))
    masks = registers_used(k, MASK)
    if masks:
        parts.append("k" + _ranges(masks))
    parts += [GPR_NAMES[r] for r in gpr if r not in abi.saved(GENERAL)]
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


def c_literal(value: int) -> str:
    """An integer as a C literal: unsigned where it is beyond long long's range (q above 2^63)."""
    return f"{value}u" if value >= 1 << 63 else str(value)


def c_lines(item: CDefine | CTable) -> list[str]:
    """A header constant as C: a macro, or a static const table."""
    lines = [f"/* {item.comment} */"] if item.comment else []
    if isinstance(item, CDefine):
        return lines + [f"#define {item.name} {c_literal(item.value)}"]
    dims = "".join(f"[{d}]" for d in item.shape)
    lines.append(f"static const {item.ctype} {item.name}{dims} = {{")
    lines += ["    " + row for row in item.rows(spell=c_literal)]
    return lines + ["};"]


def _tables(bundle: Bundle) -> list[dict]:
    """The bundle's tables, each once (`shared_table`: the longer of two under one label)."""
    tables = {}
    for fn in bundle.functions:
        for t in fn.kernel.tables:
            tables[t.label] = shared_table(tables.get(t.label), t)
    out = []
    for t in sorted(tables.values(), key=lambda t: t.label):
        directive, rows = _table_rows(t.values, t.elem_bytes)
        out.append({"label": t.label, "directive": directive, "rows": rows, "comment": t.comment, "align": t.align})
    return out


def _lengths(functions: Sequence[Function]) -> list[tuple[str, int]]:
    """Every argument's length macro and value, once, in the bundle's order."""
    out: dict[str, int] = {}
    for fn in (f for f in functions if not f.internal):  # a codelet's shape is its ISA's plan's
        for a in fn.kernel.args:
            name = length_macro(fn, a.name)
            if out.setdefault(name, a.count) != a.count:
                raise ValueError(f"{name}: the ISAs' kernels take {out[name]} and {a.count} elements")
    return list(out.items())


def _function_context(fn: Function) -> dict:
    target = fn.kernel.target
    frame = frame_of(fn.kernel) if fn.driver is None else None
    return {
        "symbol": fn.symbol,
        "label": target.fmt.symbol_prefix + fn.symbol,
        "summary": fn.summary,
        "contract": fn.contract.lines(),
        "cpu": ", ".join(e.upper() for e in fn.cpu) or "none beyond x86-64",
        "constant_time": fn.kernel.constant_time,
        "schedule": fn.notes,
        "clobbers": _clobbers(fn),
        "loops": _loops(fn.kernel),
        "prologue": frame_lines("prologue", frame) if frame else [],
        "body": body_text(fn.kernel.body, target),
        "epilogue": frame_lines("epilogue", frame) if frame else [],
        "frame": frame,
        "c_args": ", ".join(a.c_declaration for a in fn.kernel.args),
        "arg_notes": [f"{a.name}: {a.count} x {a.ctype}{'' if fn.internal else f' ({length_macro(fn, a.name)})'}, "
                      f"{a.role}, {a.align}-byte aligned"
                      + (f" ({a.preferred_align}-byte alignment is fastest)" if a.preferred_align else "")
                      for a in fn.kernel.args],
    }


def _object(bundle: Bundle) -> dict:
    """The manifest's entry for the bundle's .asm file of one ABI."""
    t = bundle.target
    entry = {"file": t.platform.asm_file(bundle.name), "abi": t.platform.name, "format": t.fmt.name}
    if t.fmt.hidden is not None:
        entry["visibility"] = t.visibility
    return entry


def _same_functions(bundles: tuple[Bundle, ...]) -> None:
    first = bundles[0]
    for b in bundles[1:]:
        if [f.symbol for f in b.functions] != [f.symbol for f in first.functions]:
            raise ValueError(f"{b.name}: the {b.target.platform.name} kernels are not those of "
                             f"{first.target.platform.name}")
    platforms = [b.target.platform.name for b in bundles]
    if len(set(platforms)) != len(platforms):
        raise ValueError(f"{first.name}: two bundles for one ABI: {platforms}")


def render(bundles: Bundle | Sequence[Bundle], command: str) -> dict[str, str]:
    """All files of a bundle, by name, as text (manifest last: it hashes the
    others). `bundles`: the kernels for each ABI the bundle is emitted for
    (`families.build_all`), or one `Bundle`; the first ABI's functions give
    the header and the manifest's function entries."""
    bundles = (bundles,) if isinstance(bundles, Bundle) else tuple(bundles)
    _same_functions(bundles)
    primary = bundles[0]
    params = manifest_params(bundles)
    params_lines = [f"{k} = {json.dumps(v)}" for k, v in params.items()]
    common = {"version": __version__, "license": LICENSE, "command": command, "name": primary.name,
              "family": params["family"]}
    files_ = {}
    objects = [_object(b) for b in bundles]
    contexts = [[_function_context(fn) for fn in b.functions] for b in bundles]  # the header reads the first's
    for b, obj, functions in zip(bundles, objects, contexts):
        tables = _tables(b)
        rodata = b.target.fmt.rodata.format(align=max([32] + [t["align"] for t in tables]))
        in_asm = [f for f, fn in zip(functions, b.functions) if fn.driver is None]  # drivers are the C units'
        files_[obj["file"]] = _ENV.get_template("asm.j2").render(
            **common, abi=b.target.abi, fmt=b.target.fmt, visibility=b.target.visibility, param_lines=params_lines,
            notes=primary.notes, rodata=rodata, tables=tables, functions=in_asm)
    guard = "KERNGEN_" + "".join(c if c.isalnum() else "_" for c in primary.name.upper()) + "_H"
    unit = dispatch(primary)
    platforms = {b.target.platform.name: b.target.platform for b in bundles}
    files_[f"{primary.name}.h"] = _ENV.get_template("header.j2").render(
        **common, title=primary.title, guard=guard, functions=contexts[0],
        constants=[c_lines(item) for item in primary.header], lengths=_lengths(primary.functions), dispatch=unit,
        prototypes=primary.prototypes,
        platforms=[{"p": p, "emitted": p.name in platforms} for p in PLATFORMS.values()])
    if unit is not None:
        files_[f"{primary.name}_dispatch.c"] = _C_ENV.get_template("dispatch.j2").render(**common, d=unit)
    for c in primary.units:
        prefix = primary.params_manifest["prefix"]
        files_[c.file] = _C_ENV.get_template(c.template).render(**common, u=c.context, p=prefix, P=prefix.upper())
    files_.update(vendor_files(bundles, files_, command))  # README.md and build files, hashed below
    functions = []
    for i, fn in enumerate(primary.functions):
        entry = fn.manifest()
        symbols = {b.target.platform.name: b.target.fmt.symbol_prefix + b.functions[i].symbol for b in bundles}
        functions.append({"symbol": entry.pop("symbol"), "symbols": symbols, **entry})
    manifest = {
        "generator": {"name": "kerngen", "version": __version__},
        "license": LICENSE,
        "command": command,
        "params": params,
        "objects": objects,
        "files": {name: hashlib.sha256(text.encode()).hexdigest() for name, text in files_.items()},
        "functions": functions,
        **({"units": [c.file for c in primary.units]} if primary.units else {}),
    }
    files_["manifest.json"] = json.dumps(manifest, indent=2) + "\n"
    return files_
