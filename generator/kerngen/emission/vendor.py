"""What a project needs to vendor a bundle: README.md, CMakeLists.txt,
meson.build, and a Rust crate (Cargo.toml, build.rs, and NAME.rs with the
`extern "C"` declarations and the header's constants).

One call: `vendor_files(bundles, files)`, where `bundles` are the kernels for
each ABI and `files` is what `render.render` returned for them (the .asm
files, NAME.h and, when already rendered, manifest.json). Nothing here depends on manifest.json, so the
renderer may call it before writing the manifest (and hash these files too)
or after. Templates (templates/vendor/) own the text; this module computes
their context from the same function data the header is rendered from, and
adds the variables the bundle's family gives for its own sections
(`Family.vendoring`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from importlib.resources import files as package_files
from typing import Any

import jinja2

from .. import LICENSE, __version__
from ..core.bundle import Bundle, CDefine, CTable, Function, manifest_params
from ..core.manifest import MANIFEST, Manifest
from .dispatch import dispatch
from .examples import Lane, lanes_by_type, length_macro
from ..machine.target import PLATFORMS


# the systems that link each object format, for people
_SYSTEMS = {"elf64": "ELF (Linux, the BSDs)", "win64": "COFF (Windows)", "macho64": "Mach-O (macOS)"}


# CPUID feature names (as the manifest spells them) where a compiler's test spells them otherwise
_GCC_CPU = {"pclmulqdq": "pclmul", "sse4_1": "sse4.1", "sse4_2": "sse4.2"}
_RUST_CPU = {"sse4_1": "sse4.1", "sse4_2": "sse4.2"}

# header macros that count elements are usize in Rust (array lengths); the others i32
_COUNT_SUFFIXES = ("_N", "_D", "_BLOCKS", "_LIMBS")

_RUST_KEYWORDS = frozenset(
    "as async await break const continue crate dyn else enum extern false fn for gen if impl in let loop match mod "
    "move mut pub ref return self static struct super trait true type unsafe use where while abstract become box do "
    "final macro override priv try typeof unsized virtual yield".split())


def _md(text: Any) -> str:
    """Text for a Markdown table cell: no markup, no cell breaks."""
    s = str(text)
    for c in "\\`*_|[]":
        s = s.replace(c, "\\" + c)
    return s.replace("<", "&lt;").replace(">", "&gt;")


def _rustdoc(text: str) -> str:
    """Text for a rustdoc line outside code blocks, where brackets would be read as links."""
    return text.replace("[", "\\[").replace("]", "\\]")


_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(package_files("kerngen") / "templates" / "vendor")),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,
)
_ENV.filters.update({
    "md": _md,
    "rustdoc": _rustdoc,
    "gcc_cpu": lambda c: _GCC_CPU.get(c, c),
    "rust_cpu": lambda c: _RUST_CPU.get(c, c),
    "json": lambda v: json.dumps(v, ensure_ascii=False),  # also a TOML and a Rust string literal
})


def _rust_type(ctype: str) -> str:
    return Lane.of(ctype).rust


def _ident(name: str) -> str:
    """A bundle name as an identifier (Meson variables, Rust paths, make variables)."""
    s = re.sub(r"[^a-z0-9_]", "_", name.lower())
    return s if s[:1].isalpha() else "kg_" + s


def _crate(name: str) -> str:
    """A bundle name as a Cargo package name (which must start with a letter)."""
    return name if name[:1].isalpha() else "kg-" + name


def _groups(lines: tuple[str, ...]) -> dict[str, list[str]]:
    """A contract's text lines by what they say: requires, ensures, and further
    notes (an indented line continues the one before it)."""
    out: dict[str, list[str]] = {"requires": [], "ensures": [], "notes": []}
    last = "notes"
    for line in lines:
        word, _, rest = line.partition(":")
        if word in ("requires", "ensures"):
            last = word
            out[word].append(rest.strip())
        elif line[:1].isspace() and out[last]:
            out[last][-1] += " " + line.strip()
        else:
            last = "notes"
            out["notes"].append(line.strip())
    return out


def _arg(a) -> dict:
    rtype = _rust_type(a.ctype)
    fastest = f" ({a.preferred_align}-byte alignment is fastest)" if a.preferred_align else ""
    return {
        "name": a.name,
        "rname": "r#" + a.name if a.name in _RUST_KEYWORDS else a.name,
        "ctype": a.ctype,
        "role": a.role,
        "count": a.count,
        "align": a.align,
        "preferred_align": a.preferred_align,
        "c_decl": a.c_declaration,
        "rust_ptr": ("*const " if a.role == "in" else "*mut ") + rtype,
        "rust_note": f"{a.name}: {a.count} x {rtype}, {a.role}, {a.align}-byte aligned{fastest}",
    }


def _function(fn: Function) -> dict:
    groups = _groups(fn.contract.lines())
    args = [_arg(a) for a in fn.kernel.args]
    return {
        "symbol": fn.symbol,
        "kind": fn.kind,
        "isa": fn.isa,
        "summary": fn.summary,
        "contract": list(fn.contract.lines()),
        "requires": groups["requires"],
        "ensures": groups["ensures"],
        "notes": groups["notes"],
        "cpu": list(fn.cpu),
        "cpu_text": ", ".join(c.upper() for c in fn.cpu) or "none beyond x86-64",
        "args": args,
        "c_args": ", ".join(a["c_decl"] for a in args),
        "lengths": ", ".join(f"{a.name}: {a.count}" for a in fn.kernel.args),
        "length_macros": [length_macro(fn, a.name) for a in fn.kernel.args],
    }


def _variants(bundle: Bundle) -> list[dict]:
    """The bundle's functions by ISA, in the bundle's order (the first is preferred where several run)."""
    out: dict[str, dict] = {}
    for f in bundle.functions:
        v = out.setdefault(f.isa, {"isa": f.isa, "cpu": set(), "functions": []})
        v["cpu"].update(f.cpu)
        v["functions"].append(f)
    return [{**v, "cpu": sorted(v["cpu"])} for v in out.values()]


def _rust_constant(item: CDefine | CTable) -> dict:
    if isinstance(item, CDefine):
        if item.name.endswith(_COUNT_SUFFIXES) and item.value >= 0:
            rtype = "usize"
        else:
            rtype = "i32" if -2**31 <= item.value < 2**31 else "i64" if item.value < 2**63 else "u64"
        return {"kind": "define", "name": item.name, "type": rtype, "value": str(item.value), "comment": item.comment}
    rtype = _rust_type(item.ctype)
    for d in reversed(item.shape):
        rtype = f"[{rtype}; {d}]"
    return {"kind": "table", "name": item.name.upper(), "c_name": item.name, "type": rtype, "rows": item.rows("[]"),
            "comment": item.comment}


def _header_constant(item: CDefine | CTable) -> dict:
    if isinstance(item, CDefine):
        return {"c": f"#define {item.name} {item.value}", "comment": item.comment}
    dims = "".join(f"[{d}]" for d in item.shape)
    return {"c": f"static const {item.ctype} {item.name}{dims}", "comment": item.comment}


def _dispatch(variants: list[dict], kind: str) -> list[dict]:
    """For each ISA's function of `kind`, in order of preference: its symbol and
    the tests (GCC / Clang, Rust) of the CPU features it needs."""
    out = []
    for v in variants:
        f = next((f for f in v["functions"] if f.kind == kind), None)
        if f is not None:
            out.append({
                "isa": v["isa"],
                "symbol": f.symbol,
                "test": " && ".join(f'__builtin_cpu_supports("{_GCC_CPU.get(c, c)}")' for c in f.cpu) or "1",
                "rust_test": " && ".join(f'is_x86_feature_detected!("{_RUST_CPU.get(c, c)}")' for c in f.cpu)
                or "true",
            })
    return out


def _alignments(functions: list[dict]) -> list[dict]:
    """Per element type: the alignment required, and the fastest one per ISA."""
    out: dict[str, dict] = {}
    for f in functions:
        for a in f["args"]:
            e = out.setdefault(a["ctype"], {"ctype": a["ctype"], "align": a["align"], "preferred": {}})
            e["align"] = max(e["align"], a["align"])
            if a["preferred_align"]:
                e["preferred"].setdefault(f["isa"], a["preferred_align"])
    return [{**e, "preferred": [{"isa": k, "align": v} for k, v in e["preferred"].items()]} for e in out.values()]


def _unit(bundle: Bundle, files: Mapping[str, str]) -> dict | None:
    """The bundle's dispatch unit (a bundle of several ISAs): its source, what
    the header declares for it, and the function without suffix per kind."""
    d = dispatch(bundle)
    if d is None:
        return None
    declared = [f"const char *{d.prefix}_isa(void);", f"int {d.prefix}_use_isa(const char *isa);"]
    declared += [f"void {e.symbol}({e.c_args});" for e in d.entries]
    names = {e.symbol for e in d.entries}
    first = {f.symbol.removesuffix("_" + f.isa): f for f in reversed(bundle.functions)}
    rust = [{"symbol": e.symbol, "args": _function(first[e.symbol])["args"]} for e in d.entries]
    chain = {}  # kind -> the name that dispatches it (the kernel's name without its ISA suffix)
    for f in bundle.functions:
        base = f.symbol.removesuffix("_" + f.isa)
        if base in names:
            chain.setdefault(f.kind, base)
    return {"sources": [n for n in files if n.endswith("_dispatch.c")], "declared": declared, "by_kind": chain,
            "prefix": d.prefix, "rust": rust, "isas": [t.name for t in d.isas]}


def _one(files: Mapping[str, str], suffix: str) -> str:
    found = [n for n in files if n.endswith(suffix)]
    if len(found) != 1:
        raise ValueError(f"the bundle's files hold {len(found)} {suffix} files, expected one: {sorted(files)}")
    return found[0]


def _objects(bundles: tuple[Bundle, ...], files: Mapping[str, str]) -> list[dict]:
    """The bundle's .asm file of each ABI, with what the build files need to know of it."""
    out = []
    for b in bundles:
        p = b.target.platform
        asm = p.asm_file(b.name)
        if asm not in files:
            raise ValueError(f"the bundle's files hold no {asm} for the {p.name} ABI: {sorted(files)}")
        obj = asm.removesuffix(".asm") + (".obj" if p.fmt.name == "win64" else ".o")
        out.append({"asm": asm, "fmt": p.fmt.name, "abi": p.abi.title, "systems": _SYSTEMS[p.fmt.name], "obj": obj})
    return out


def _command(bundle: Bundle, files: Mapping[str, str], header: str) -> str:
    """The command the bundle's own banners name."""
    if MANIFEST in files:
        return Manifest.parse(json.loads(files[MANIFEST]), MANIFEST).command
    m = re.search(r"Regenerate with: (.*)$", files[header], re.MULTILINE)
    return m.group(1).strip() if m else f"kerngen emit {bundle.name}"


def context(bundles: Bundle | Sequence[Bundle], files: Mapping[str, str], command: str | None = None) -> dict:
    """What the vendoring templates are rendered from. `bundles`: the kernels
    for each ABI of the bundle (the first ABI's are described), or one."""
    bundles = (bundles,) if isinstance(bundles, Bundle) else tuple(bundles)
    bundle = bundles[0]
    header = _one(files, ".h")
    objects = _objects(bundles, files)
    name = bundle.name
    variants = _variants(bundle)
    functions = [_function(f) for f in bundle.functions]
    common = [n for n in functions[0]["notes"] if all(n in f["notes"] for f in functions)]
    for f in functions:
        f["own_notes"] = [n for n in f["notes"] if n not in common]
    generic = {
        "version": __version__,
        "license": LICENSE,
        "command": command or _command(bundle, files, header),
        "name": name,
        "ident": _ident(name),
        "crate": _crate(name),
        "crate_ident": _crate(name).replace("-", "_"),
        "title": bundle.title,
        "params": [{"key": k, "value": json.dumps(v)} for k, v in manifest_params(bundles).items()],
        "objects": objects,
        "abi_choices": "|".join(PLATFORMS),
        "visibility": bundle.target.visibility,
        "header": header,
        "obj": f"{name}.o",
        "lib": name,
        "bindings": f"{name}.rs" if name != "build" else "build-bindings.rs",
        "functions": functions,
        "common_notes": common,
        "variants": [{"isa": v["isa"], "cpu": v["cpu"]} for v in variants],
        "dispatch": _dispatch(variants, bundle.functions[0].kind),
        "dispatch_args": functions[0]["args"],
        "dispatch_rust_type": 'unsafe extern "C" fn(' + ", ".join(a["rust_ptr"] for a in functions[0]["args"]) + ")",
        "aligns": _alignments(functions),
        "constants": [_header_constant(item) for item in bundle.header],
        "rust_constants": [_rust_constant(item) for item in bundle.header],
        "unit": _unit(bundle, files),
        # every C file of the bundle (the dispatch unit, a planned transform's driver): what the build files compile
        "c_sources": sorted(n for n in files if n.endswith(".c")),
        "c_units": [{"file": c.file, "summary": c.summary} for c in bundle.units],
        "lanes": lanes_by_type(bundle.functions),
    }
    own = bundle.family.vendoring(bundle) if bundle.family is not None else {}
    if own.keys() & generic.keys():
        raise ValueError(f"the family's vendoring variables {sorted(own.keys() & generic.keys())} would replace "
                         "the generic ones")
    return generic | own


# file in the bundle -> its template
_FILES = {
    "README.md": "README.md.j2",
    "CMakeLists.txt": "CMakeLists.txt.j2",
    "meson.build": "meson.build.j2",
    "Cargo.toml": "Cargo.toml.j2",
    "build.rs": "build.rs.j2",
}


def vendor_files(bundles: Bundle | Sequence[Bundle], files: Mapping[str, str],
                 command: str | None = None) -> dict[str, str]:
    """The files that let a C, C++ or Rust project build the bundle with Make,
    CMake, Meson or Cargo, by name: README.md, CMakeLists.txt, meson.build,
    Cargo.toml, build.rs and NAME.rs. `files`: what `render` returned for the
    bundle; `command` (default: the one its files name) is what the banners
    say regenerates them."""
    ctx = context(bundles, files, command)
    out = {name: _ENV.get_template(template).render(**ctx) for name, template in _FILES.items()}
    out[ctx["bindings"]] = _ENV.get_template("bindings.rs.j2").render(**ctx)
    clash = set(out) & {*(o["asm"] for o in ctx["objects"]), ctx["header"], "manifest.json"}
    if clash:
        raise ValueError(f"vendoring files would replace the bundle's own: {sorted(clash)}")
    return out
