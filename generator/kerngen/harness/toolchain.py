"""The toolchain of the C test and bench harness (C sources in ``harness/``,
shipped in the package as ``kerngen/csrc``): NASM assembles, gcc compiles
and links, and every product is cached on disk.

It builds the harness programs (``kg_runner``, ``kg_batch``, ``kg_bench``),
assembles emitted bundles into shared objects and compiles the C libraries
the checks compare against. Products go to a caller-chosen work directory,
keyed by a hash of their inputs (sources, flags, what they link), so repeated
calls reuse them and the repository stays clean; a product is built in a
private temporary directory and moved into place atomically, so concurrent
builds of the same key (test workers) lose nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING

from ..emission.files import write
from ..emission.render import render
from ..errors import HarnessError
from ..machine.formats import ELF64  # the harness loads kernels on this (Linux) machine

if TYPE_CHECKING:
    from ..core.bundle import Bundle

__all__ = [
    "HARNESS_DIR", "assemble_shared", "build_batch", "build_bench", "build_memcheck", "build_runner", "build_shared_c",
    "bundle_library", "cached", "digest", "harness_source", "run_build", "tool",
]


def _harness_dir() -> Path:
    with as_file(files("kerngen") / "csrc") as path:  # a directory of the installed package
        return Path(path)


HARNESS_DIR = _harness_dir()

_C_FLAGS = ("-O2", "-std=c11", "-Wall", "-Wextra")

_INSTALL_HINTS = {
    "nasm": "install it with `apt-get install nasm` (NASM 2.14 or later)",
    "gcc": "install it with `apt-get install gcc`",
}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        hint = _INSTALL_HINTS.get(name, "install it")
        raise HarnessError(f"`{name}` not found on PATH; {hint}")
    return path


def run_build(cmd: Sequence[str | os.PathLike[str]], what: str) -> None:
    argv = [str(c) for c in cmd]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise HarnessError(f"{what}: cannot run {argv[0]}: {exc}") from exc
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip()
        raise HarnessError(f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n{msg}")


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:16]


def harness_source(name: str) -> Path:
    path = HARNESS_DIR / name
    if not path.is_file():
        raise HarnessError(f"harness source {path} is missing")
    return path


def cached(final: Path, make: Callable[[Path], Path]) -> Path:
    """`final` if it was built before; otherwise `make(tmp)` builds it in a
    private temporary directory beside it and returns the file, which is then
    moved into place (os.replace is atomic: a concurrent build of the same
    key loses nothing)."""
    if final.is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent) as tmp_s:
        os.replace(make(Path(tmp_s)), final)
    return final


def _build_program(workdir: Path, name: str, main_source: str) -> Path:
    nasm, gcc = tool("nasm"), tool("gcc")
    sources = [harness_source(n) for n in (main_source, "vectors.c", "vectors.h",
                                            "abi_check.h", "abi_check.asm", "abi_control.inc")]
    key = digest(name, *_C_FLAGS, *(p.read_bytes() for p in sources))

    def make(tmp: Path) -> Path:
        obj = tmp / "abi_check.o"
        run_build([nasm, "-f", ELF64.name, "-I", f"{HARNESS_DIR}/", "-o", obj, HARNESS_DIR / "abi_check.asm"],
             "assembling abi_check.asm")
        run_build([gcc, *_C_FLAGS, "-I", HARNESS_DIR, "-o", tmp / name,
              HARNESS_DIR / main_source, HARNESS_DIR / "vectors.c", obj, "-ldl"],
             f"building {name}")
        return tmp / name

    return cached(Path(workdir) / f"kg-harness-{key}" / name, make)


def build_runner(workdir: Path) -> Path:
    """Compiles ``kg_runner`` into ``workdir`` (cached) and returns its path."""
    return _build_program(Path(workdir), "kg_runner", "runner.c")


def build_batch(workdir: Path) -> Path:
    """Compiles ``kg_batch`` into ``workdir`` (cached) and returns its path."""
    return _build_program(Path(workdir), "kg_batch", "batch.c")


def build_memcheck(workdir: Path) -> Path:
    """Compiles ``kg_memcheck`` (its client requests from valgrind's
    ``valgrind/memcheck.h``) into ``workdir`` (cached) and returns its path."""
    return _build_program(Path(workdir), "kg_memcheck", "memcheck.c")


def build_bench(workdir: Path) -> Path:
    """Compiles ``kg_bench`` into ``workdir`` (cached) and returns its path."""
    return _build_program(Path(workdir), "kg_bench", "bench.c")


def assemble_shared(asm_path: Path, workdir: Path, units: Sequence[Path] = ()) -> Path:
    """Assembles a NASM file as ELF, its symbols of default visibility, and
    links it into a shared object, with the bundle's C `units` (planned
    transforms' drivers) compiled beside it.

    The file's own directory is on the include path. The result is named
    after the file and a hash of its text and the units', so distinct versions never clash.
    """
    asm_path = Path(asm_path)
    nasm, gcc = tool("nasm"), tool("gcc")
    try:
        texts = [asm_path.read_bytes(), *(Path(u).read_bytes() for u in units)]
    except OSError as exc:
        raise HarnessError(f"cannot read the bundle's sources: {exc}") from exc

    def make(tmp: Path) -> Path:
        obj, so = tmp / f"{asm_path.stem}.o", tmp / f"{asm_path.stem}.so"
        # the harness looks the kernels up with dlsym: export them whatever the bundle's visibility
        run_build([nasm, "-f", ELF64.name, "-DKERNGEN_VISIBILITY=default", "-I", f"{asm_path.resolve().parent}/",
                   "-o", obj, asm_path], f"assembling {asm_path.name}")
        run_build([gcc, "-O2", "-fPIC", "-shared", "-I", asm_path.resolve().parent, "-o", so, *units, obj],
                  f"linking {asm_path.name}")
        return so

    return cached(Path(workdir) / f"{asm_path.stem}-{digest(*texts)}.so", make)


def bundle_library(bundle: Bundle, command: str, directory: Path, workdir: Path) -> Path:
    """A bundle built for this machine (System V, ELF) rendered into `directory`
    (its banners naming `command`) and assembled into a shared object."""
    write(render(bundle, command), directory)
    return assemble_shared(Path(directory) / bundle.target.platform.asm_file(bundle.name), workdir,
                           [Path(directory) / c.file for c in bundle.units])


def build_shared_c(source: str, stem: str, flags: Sequence[str], workdir: Path, what: str,
                   link: Sequence[str | os.PathLike[str]] = (), headers: Mapping[str, str] | None = None) -> Path:
    """Compiles ``harness/<source>`` with ``flags`` into a shared object
    (cached by the source, the harness headers, the generated `headers`
    (name -> text, found first on the include path), the flags and what it
    links: libraries and ``-l`` options) and returns it; `what` names the
    build in errors. Generated headers are kept beside the object for reading."""
    gcc = tool("gcc")
    src = harness_source(source)
    own = sorted(HARNESS_DIR.glob("*.h"))
    made = dict(headers or {})
    key = digest(src.read_bytes(), *(h.read_bytes() for h in own), *flags, *map(str, link),
                  *(part for name, text in sorted(made.items()) for part in (name, text)))
    final = Path(workdir) / f"{stem}-{key}" / "lib.so"

    def make(tmp: Path) -> Path:
        for name, text in made.items():
            (tmp / name).write_text(text)
        run_build([gcc, "-fPIC", "-shared", *flags, "-I", tmp, "-I", HARNESS_DIR, "-o", tmp / "lib.so", src, *link],
             what)
        for name in made:
            os.replace(tmp / name, final.parent / name)
        return tmp / "lib.so"

    return cached(final, make)

