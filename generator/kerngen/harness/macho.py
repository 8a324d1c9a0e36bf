"""The Mach-O object of a bundle, checked without a Mac.

No macOS runs here, so a bundle's Mach-O file is assembled with ``nasm -f
macho64`` and its object read back with LLVM's tools (``llvm-nm -m``,
``llvm-objdump --macho``): every function the manifest names is defined in
``__TEXT,__text`` under its underscored symbol, with the visibility the
manifest records, and nothing else is exported or left undefined; code and
tables sit in ``__TEXT,__text`` and ``__TEXT,__const`` only; every relocation
is PC-relative (``default rel``: no absolute address in code or tables, so
the object links into position-independent images without text relocations).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ..errors import HarnessError
from ..machine.formats import MACHO64
from . import toolchain

TOOLS = ("nasm", "llvm-nm", "llvm-objdump")
SECTIONS = {("__TEXT", "__text"), ("__TEXT", "__const")}

# llvm-nm -m: "0000000000000000 (__TEXT,__text) private external _f", "(undefined) external _g"
_NM = re.compile(r"^(?:[0-9a-f]+ )?\((?:(\w+),(\w+)|undefined)\) (.*) (\S+)$")
# llvm-objdump --macho -r: "00000009 True  long   True   SIGNED  False     tab"
_RELOC = re.compile(r"^[0-9a-f]{8} (True|False)\s+\w+\s+(?:True|False)\s+(\w+)")


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def _run(argv: list, what: str) -> str:
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise HarnessError(f"{what} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
    return r.stdout


def assemble(asm_path: Path, workdir: Path) -> Path:
    """``nasm -f macho64`` of the file (its directory on the include path), cached by its text."""
    asm_path = Path(asm_path)
    text = asm_path.read_bytes()

    def make(tmp: Path) -> Path:
        obj = tmp / f"{asm_path.stem}.o"
        toolchain.run_build([toolchain.tool("nasm"), "-f", MACHO64.name, "-I", f"{asm_path.resolve().parent}/",
                          "-o", obj, asm_path], f"assembling {asm_path.name} as Mach-O")
        return obj

    return toolchain.cached(Path(workdir) / f"{asm_path.stem}-{toolchain.digest(text)}.macho.o", make)


def object_problems(obj: Path, symbols: Mapping[str, str], visibility: str) -> list[str]:
    """What is wrong with the Mach-O object `obj` whose exported functions
    should be `symbols` (C name -> Mach-O symbol), of `visibility`; empty
    when nothing is."""
    problems = []
    defined: dict[str, tuple[str, str]] = {}  # symbol -> (section, linkage)
    for line in _run(["llvm-nm", "-m", obj], f"llvm-nm -m {obj.name}").splitlines():
        m = _NM.match(line.strip())
        if m is None:
            continue
        seg, sect, linkage, name = m.groups()
        if seg is None:
            problems.append(f"{name} is undefined: the kernels call nothing outside the object")
            continue
        defined[name] = (f"{seg},{sect}", linkage)
    want_linkage = "private external" if visibility == "hidden" else "external"
    for c_name, sym in symbols.items():
        if sym != "_" + c_name:
            problems.append(f"{c_name}: Mach-O symbol {sym!r}, expected the leading underscore: _{c_name}")
        if sym not in defined:
            problems.append(f"{sym} is not defined in the object")
            continue
        section, linkage = defined[sym]
        if section != "__TEXT,__text":
            problems.append(f"{sym} is in {section}, not __TEXT,__text")
        if linkage != want_linkage:
            problems.append(f"{sym} is {linkage}, expected {want_linkage} ({visibility} visibility)")
    for name, (section, linkage) in defined.items():
        if linkage.endswith("external") and not linkage.startswith("non-") and name not in symbols.values():
            problems.append(f"{name} ({section}) is exported but is no function of the manifest")
    sections = _sections(_run(["llvm-objdump", "--macho", "--private-headers", obj],
                              f"llvm-objdump --private-headers {obj.name}"))
    for s in sorted(sections - SECTIONS):
        problems.append(f"unexpected section {s[0]},{s[1]}")
    if ("__TEXT", "__text") not in sections:
        problems.append("no __TEXT,__text section")
    relocs = _run(["llvm-objdump", "--macho", "-r", obj], f"llvm-objdump -r {obj.name}")
    where = None
    for line in relocs.splitlines():
        head = re.match(r"^Relocation information \((\w+),(\w+)\)", line)
        if head:
            where = f"{head.group(1)},{head.group(2)}"
            continue
        m = _RELOC.match(line.strip())
        if m and (m.group(1) != "True" or m.group(2) not in ("SIGNED", "BRANCH")):
            problems.append(f"an absolute relocation in {where}: {line.strip()} (every reference must be RIP-relative)")
    return problems


def _sections(private_headers: str) -> set[tuple[str, str]]:
    """(segment, section) of every section the load commands list."""
    names = re.findall(r"^\s*sectname (\S+)\s*\n\s*segname (\S+)", private_headers, re.M)
    return {(seg, sect) for sect, seg in names}
