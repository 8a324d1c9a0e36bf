"""The package's shape: no import cycles, no upward or private imports, and
ISA, ABI and 16-bit instruction names only where they belong."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PKG = REPO / "generator" / "kerngen"


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """(module imported, names imported from it) for every kerngen import outside `if TYPE_CHECKING`."""
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, ast.ImportFrom):
            continue
        base = name.split(".")
        if node.level:
            base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
        mod = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
        for a in node.names:
            target = f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod
            if target in modules and target != name:
                out.append((target, [a.name]))
    return out


def test_no_import_cycles():
    modules = _modules()
    graph = {m: {t for t, _ in _imports(m, f, modules)} for m, f in modules.items()}

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            for n in graph[todo.pop()]:
                if n == b:
                    return True
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return False

    cycles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if reaches(b, a)})
    assert cycles == []


# a family's parameters and what reading them needs (the maths, the chosen roots, the batches' keys): none
# of them imports a module that builds kernels
_PARAMETER_MODULES = (".params", ".maths", ".gf2x", ".roots", ".batches")


def test_layers_import_only_downwards_and_nothing_private():
    """Each layer imports only those below it: errors, then the machine
    description, the IR, core (parameters, contracts, bundles), the emission
    back end, the harness, the passes, the families, the store of built
    bundles, the Python library, the commands and the CLI; family parameters know no kernels; nobody imports another module's
    _private name."""
    modules = _modules()
    order = ["kerngen.errors", "kerngen.machine", "kerngen.ir", "kerngen.core", "kerngen.emission", "kerngen.harness",
             "kerngen.passes", "kerngen.families", "kerngen.store", "kerngen.library", "kerngen.commands", "kerngen.cli"]
    forbidden = {layer: tuple(order[i + 1:]) for i, layer in enumerate(order)}
    bad = []
    for m, f in modules.items():
        for target, names in _imports(m, f, modules):
            for layer, below in forbidden.items():
                if m.startswith(layer) and target.startswith(below):
                    bad.append(f"{m} imports {target}")
            if m.endswith(_PARAMETER_MODULES) and m.startswith("kerngen.families") and not target.endswith(
                    _PARAMETER_MODULES) and target.startswith("kerngen.families"):
                bad.append(f"{m} imports {target}")
            bad += [f"{m} imports {target}.{n}" for n in names if n.startswith("_") and n != "__version__"]
    assert bad == []


# string constants that name an ISA, an ABI or object format, a register, or a 16-bit instruction
_ISA = re.compile(r"^(avx2|sse|ymm\d+|xmm\d+)$")
_ABI = re.compile(r"^(elf64|win64|macho64|sysv|macho)$|System V")
_WORD_OPS = re.compile(r"^v?p(add|sub|mull|mulh|mulhu|mulhrs|sra|srl|sll|blend|broadcast|extr)w$|^vpunpck[lh]wd$")
ALLOWED = ("machine/", "emission/")


def _strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def test_isa_abi_and_word_literals_live_in_the_machine_and_emission_layers():
    hits = []
    for f in PKG.rglob("*.py"):
        rel = f.relative_to(PKG).as_posix()
        if rel.startswith(ALLOWED):
            continue
        for s in _strings(f):
            if _ISA.match(s) or _ABI.search(s) or _WORD_OPS.match(s):
                hits.append(f"{rel}: {s!r}")
    assert hits == []


# what differs between ISAs is data of the machine layer (an ISA's encoding, its legalisation strategy),
# not flags read by the passes, the families or the back end
_ISA_FLAGS = {"vex", "lanes_on_gpr"}


def test_no_isa_flag_is_read_outside_the_machine_layer():
    hits = []
    for layer in ("passes", "families", "emission"):
        for f in sorted((PKG / layer).rglob("*.py")):
            rel = f.relative_to(PKG).as_posix()
            tree = ast.parse(f.read_text())
            hits += [f"{rel}:{n.lineno} .{n.attr}" for n in ast.walk(tree)
                     if isinstance(n, ast.Attribute) and n.attr in _ISA_FLAGS]
    assert hits == []


def test_verifier_is_the_abstract_machine_alone():
    """passes/verify.py interprets instructions; the checks of tagged groups
    live in passes/idioms, found by tag kind: verify.py names no kind."""
    from kerngen.passes.idioms import REGISTERED

    verify = PKG / "passes" / "verify.py"
    kinds = {kind for check in REGISTERED for kind in check.kinds}
    assert len(verify.read_text().splitlines()) <= 450
    assert sorted(kinds & set(_strings(verify))) == []


def test_each_idiom_module_registers_its_own_kinds():
    import importlib

    from kerngen.passes.idioms import REGISTERED, check_for, lemma

    kinds = [kind for check in REGISTERED for kind in check.kinds]
    assert len(kinds) == len(set(kinds))
    modules = sorted(f.stem for f in (PKG / "passes" / "idioms").glob("*.py"))
    checks = [importlib.import_module(f"kerngen.passes.idioms.{m}").CHECK for m in modules
              if m not in ("__init__", "base", "terms", "lemma")]
    assert sorted(map(id, checks)) == sorted(map(id, REGISTERED))
    assert all(check_for(kind) is check for check in REGISTERED for kind in check.kinds)
    assert check_for("no such kind") is lemma.CHECK


def test_emission_and_core_name_no_family_or_kind_of_one():
    """Each family gives its vendoring context, options and checks through
    the family protocol: no string of emission/ or core/ names a family or
    one of the function kinds a family declares."""
    import json

    from kerngen.families import FAMILIES

    declared = {f.name: f.kinds for f in FAMILIES.values()}
    for manifest in sorted((REPO / "generated").glob("*/manifest.json")):  # the declarations are complete
        m = json.loads(manifest.read_text())
        assert {fn["kind"] for fn in m["functions"]} <= declared[m["params"]["family"]], manifest
    names = set(declared) | {k for kinds in declared.values() for k in kinds}
    hits = [f"{f.relative_to(PKG).as_posix()}: {s!r}" for layer in ("emission", "core")
            for f in sorted((PKG / layer).rglob("*.py")) for s in _strings(f) if s in names]
    assert hits == []
