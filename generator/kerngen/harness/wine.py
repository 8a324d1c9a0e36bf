"""The Win64 form of the test harness, run under Wine.

A bundle rendered for the Win64 target (Microsoft x64 calling convention,
COFF objects) is tested here exactly as the System V one is:
the same ``runner.c`` and ``vectors.c``, built with MinGW-w64 against the
Win64 checked-call stub ``harness/abi_check_win64.asm`` (``win64.c`` holds
what differs on Windows), read the same vector files and print the same
output, which ``protocol`` parses into the same ``CaseResult`` records. The
stub seeds and compares rbx, rbp, rdi, rsi, r12-r15 and xmm6-xmm15, passes
a fifth argument on the stack above the 32-byte shadow space, and checks
rsp, the direction flag, MXCSR's control bits and vzeroupper.

Kernels are assembled with ``nasm -f win64`` and linked into a DLL whose
exports are listed in a module-definition (.def) file: NASM's ``global``
makes a COFF symbol external but does not export it from a DLL, and a .def
file exports exactly the symbols named (the manifest's, for a bundle), so a
symbol the manifest promises but the object lacks fails the link, and
nothing else leaks into the export table. The DLL has no C runtime and no
entry point.

Programs run under ``wine`` (64-bit) in a Wine prefix of their own, made
once in the caller's work directory (``wine_prefix``; several hundred MB,
a few seconds to initialise) and reused by every later run, without a
display, debug output, or the Mono and Gecko installers. One Wine process
runs all cases given; ``stop_wineserver`` ends the prefix's server before
its directory is deleted.

Build products are cached in the work directory by a hash of their inputs,
with ``toolchain``'s own helpers (its cache, digest and build-command runner)
and ``protocol``'s output parser, so both harnesses agree on formats by construction.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import HarnessError
from ..machine.formats import COFF64
from . import protocol, toolchain
from .cpu import AbiCapabilities, parse_capabilities
from .protocol import Case, CaseResult

__all__ = [
    "CRASH_STATUS", "MINGW_GCC", "abi_capabilities_wine", "assemble_dll", "build_runner_win64", "global_symbols",
    "missing_tools", "run_runner_wine", "run_wine", "stop_wineserver", "to_windows_path", "wine_env", "wine_prefix",
]

MINGW_GCC = "x86_64-w64-mingw32-gcc"
CRASH_STATUS = 3  # KG_WIN64_CRASH_STATUS in harness/win64.h: a kernel faulted

_C_FLAGS = ("-O2", "-std=c11", "-Wall", "-Wextra", "-D__USE_MINGW_ANSI_STDIO=1")
_LIBS = ("-lbcrypt",)
_SOURCES = ("runner.c", "vectors.c", "win64.c", "vectors.h", "win64.h", "abi_check_win64.h",
            "abi_check_win64.asm", "abi_control.inc")
_WINE_FALLBACKS = ("/usr/lib/wine/wine64", "/usr/lib64/wine/wine64")
_INSTALL_HINTS = {
    "nasm": "install it with `apt-get install nasm`",
    MINGW_GCC: "install it with `apt-get install gcc-mingw-w64-x86-64`",
    "wine": "install it with `apt-get install wine64 wine`",
}
_GLOBAL = re.compile(r"^[ \t]*global[ \t]+([^;\n]+)", re.IGNORECASE | re.MULTILINE)
_PREFIX_READY = ".kg-prefix-ready"


# ---------------------------------------------------------------------------
# tools


def _which(name: str) -> str | None:
    if name == "wine":
        for cand in ("wine64", "wine"):
            path = shutil.which(cand)
            if path:
                return path
        return next((p for p in _WINE_FALLBACKS if os.access(p, os.X_OK)), None)
    return shutil.which(name)


def _tool(name: str) -> str:
    path = _which(name)
    if path is None:
        raise HarnessError(f"`{name}` not found on PATH; {_INSTALL_HINTS.get(name, 'install it')}")
    return path


def missing_tools() -> list[str]:
    """The tools the Win64 harness needs that this machine lacks, each with
    how to install it (an empty list when it can run)."""
    return [f"{name} ({_INSTALL_HINTS[name]})" for name in ("nasm", MINGW_GCC, "wine") if _which(name) is None]


def _wineserver(wine: str) -> str | None:
    """The wineserver belonging to `wine` (beside it, else on PATH)."""
    real = Path(wine).resolve()
    for cand in (real.parent / "wineserver", real.parent / "wineserver64"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return shutil.which("wineserver")


def to_windows_path(path: Path) -> str:
    """`path` as a Windows program under Wine names it: on drive Z:, which a
    new prefix maps to the Unix root."""
    return "Z:" + str(Path(path).resolve()).replace("/", "\\")


# ---------------------------------------------------------------------------
# builds


def build_runner_win64(workdir: Path) -> Path:
    """Compiles ``kg_runner.exe`` (runner.c, vectors.c and win64.c with
    MinGW-w64, against the Win64 checked-call stub) into ``workdir``
    (cached) and returns its path."""
    nasm, gcc = _tool("nasm"), _tool(MINGW_GCC)
    sources = [toolchain.harness_source(n) for n in _SOURCES]
    key = toolchain.digest("kg_runner.exe", *_C_FLAGS, *_LIBS, *(p.read_bytes() for p in sources))
    src = toolchain.HARNESS_DIR

    def make(tmp: Path) -> Path:
        obj = tmp / "abi_check_win64.obj"
        toolchain.run_build([nasm, "-f", COFF64.name, "-I", f"{src}/", "-o", obj, src / "abi_check_win64.asm"],
                         "assembling abi_check_win64.asm")
        toolchain.run_build([gcc, *_C_FLAGS, "-I", src, "-o", tmp / "kg_runner.exe",
                          src / "runner.c", src / "vectors.c", src / "win64.c", obj, *_LIBS],
                         "building kg_runner.exe")
        return tmp / "kg_runner.exe"

    return toolchain.cached(Path(workdir) / f"kg-harness-win64-{key}" / "kg_runner.exe", make)


def global_symbols(asm_text: str) -> list[str]:
    """The names a NASM file declares ``global`` (without ELF type suffixes)."""
    names: list[str] = []
    for m in _GLOBAL.finditer(asm_text):
        for part in m.group(1).split(","):
            name = part.strip().split(":")[0].strip()
            if name and name not in names:
                names.append(name)
    return names


def assemble_dll(asm_path: Path, workdir: Path, exports: Sequence[str] | None = None,
                 units: Sequence[Path] = ()) -> Path:
    """Assembles a NASM file with ``nasm -f win64`` and links it into a DLL
    exporting `exports` (default: every ``global`` of the file) through a
    .def file, with the bundle's C `units` (a planned transform's driver)
    compiled beside it. The file's own directory is on the include path; the
    result is named after the file and a hash of its text, the units' and the exports."""
    asm_path = Path(asm_path)
    nasm, gcc = _tool("nasm"), _tool(MINGW_GCC)
    try:
        text = asm_path.read_bytes()
        unit_texts = [Path(u).read_bytes() for u in units]
    except OSError as exc:
        raise HarnessError(f"cannot read the bundle's sources: {exc}") from exc
    names = list(exports) if exports is not None else global_symbols(text.decode("utf-8", "replace"))
    if not names:
        raise HarnessError(f"{asm_path.name}: nothing to export")
    for name in names:
        if not protocol.SYMBOL.match(name):
            raise HarnessError(f"{asm_path.name}: bad export name {name!r}")

    def make(tmp: Path) -> Path:
        obj, dll, deffile = tmp / f"{asm_path.stem}.obj", tmp / f"{asm_path.stem}.dll", tmp / f"{asm_path.stem}.def"
        deffile.write_text(f"LIBRARY {asm_path.stem}.dll\nEXPORTS\n" + "".join(f"    {n}\n" for n in names))
        toolchain.run_build([nasm, "-f", COFF64.name, "-I", f"{asm_path.resolve().parent}/", "-o", obj, asm_path],
                         f"assembling {asm_path.name} for Win64")
        # no C runtime and no entry point where only kernels are linked: they need neither
        # (units: the C runtime, libgcc's 128-bit division linked in, as Wine has no libgcc DLL)
        runtime = (["-O2", "-static-libgcc", "-I", asm_path.resolve().parent, *units] if units else
                   ["-nostdlib", "-Wl,-e,0"])
        toolchain.run_build([gcc, "-shared", *runtime, "-o", dll, obj, deffile], f"linking {asm_path.name} into a DLL")
        return dll

    key = toolchain.digest(text, *unit_texts, *names)
    return toolchain.cached(Path(workdir) / f"{asm_path.stem}-{key}.dll", make)


# ---------------------------------------------------------------------------
# the Wine prefix


def _run_wine_process(argv: Sequence[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Runs a Wine program and returns its exit status and output. The output
    goes through files, not pipes: the wineserver and Wine's service
    processes that the program starts inherit its standard handles and
    outlive it by seconds, and reading a pipe to its end would wait for them."""
    with tempfile.TemporaryFile("w+", errors="replace") as out, \
            tempfile.TemporaryFile("w+", errors="replace") as err:
        proc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                              timeout=timeout, check=False)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())


def wine_env(prefix: Path) -> dict[str, str]:
    """The environment Wine runs with: the prefix, no debug output, no
    Mono/Gecko installers or menu entries, no display."""
    env = dict(os.environ)
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "WINEDEBUG", "WINEDLLOVERRIDES", "WINELOADER"):
        env.pop(var, None)
    env.update(WINEPREFIX=str(prefix), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d")
    return env


def wine_prefix(workdir: Path, timeout: float = 300.0) -> Path:
    """A Wine prefix in ``workdir``, made on first use (``wineboot --init``)
    and reused afterwards; concurrent callers wait for one another."""
    wine = _tool("wine")
    real = Path(wine).resolve()
    stamp = f"{real}:{real.stat().st_mtime_ns}"
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    prefix = workdir / f"wine-prefix-{toolchain.digest(stamp)}"
    if (prefix / _PREFIX_READY).is_file():
        return prefix
    with open(workdir / ".kg-wine-prefix.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (prefix / _PREFIX_READY).is_file():
            return prefix
        if prefix.exists():  # a start that did not finish
            stop_wineserver(workdir, prefix)
            shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir()
        try:
            proc = _run_wine_process([wine, "wineboot", "--init"], wine_env(prefix), timeout)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"initialising the Wine prefix {prefix} timed out after {timeout} s") from exc
        # the registry reaches system.reg when the wineserver ends (idle, or stop_wineserver)
        if proc.returncode != 0:
            raise HarnessError(f"initialising the Wine prefix {prefix} failed (exit {proc.returncode}): "
                               f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
        (prefix / _PREFIX_READY).write_text(stamp + "\n")
    return prefix


def stop_wineserver(workdir: Path, prefix: Path | None = None) -> None:
    """Ends the wineserver of the prefix in ``workdir`` (and the Wine
    processes it serves), so the directory can be deleted. Harmless when none
    runs; Wine ends an idle server by itself a few seconds after its last
    program."""
    wine = _which("wine")
    if wine is None:
        return
    server = _wineserver(wine)
    prefixes = [prefix] if prefix is not None else sorted(Path(workdir).glob("wine-prefix-*"))
    for p in prefixes:
        if server is None or not p.is_dir():
            continue
        subprocess.run([server, "-k"], env=wine_env(p), capture_output=True, timeout=60, check=False)


# ---------------------------------------------------------------------------
# running


def run_wine(workdir: Path, argv: Sequence[str], timeout: float,
              env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    prefix = wine_prefix(workdir)
    env = wine_env(prefix)
    env.pop("KG_SEED", None)
    env.update(env_extra or {})
    try:
        return _run_wine_process([_tool("wine"), *argv], env, timeout)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"{Path(argv[0]).name} under Wine timed out after {timeout} s") from exc


def run_runner_wine(
    dll: Path | Sequence[Path],
    cases: Sequence[Case],
    workdir: Path,
    seed: int | None = None,
    *,
    timeout: float = 300.0,
) -> list[CaseResult]:
    """Runs ``cases`` once each through ``kg_runner.exe`` under Wine, in one
    Wine process, and returns their verdicts in order, as
    ``protocol.run_runner`` does for ELF libraries. ``dll`` is one DLL or a
    list (``Case.lib`` indexes it); ``workdir`` holds the runner build and
    the Wine prefix; ``seed`` fixes canaries and register seeds. A kernel
    that faults raises protocol.KernelFault (a HarnessError) naming the case
    and the exception."""
    libs = protocol.check_libs(dll)
    workdir = Path(workdir)
    runner = build_runner_win64(workdir)
    with tempfile.TemporaryDirectory(prefix="kg-wine-run-") as tmp_s:
        tmp = Path(tmp_s)
        vec, out = tmp / "vectors.txt", tmp / "output.txt"
        protocol.write_vectors(vec, cases)
        argv = [str(runner), *map(to_windows_path, libs), to_windows_path(vec), to_windows_path(out)]
        proc = run_wine(workdir, argv, timeout, None if seed is None else {"KG_SEED": str(seed)})
        text = out.read_text() if out.exists() else ""
    results = protocol.parse_runner_output(text, cases)
    if proc.returncode != 0:
        detail = proc.stderr.strip()
        if proc.returncode == CRASH_STATUS and len(results) < len(cases):
            # output is flushed per case: the first case without a verdict crashed
            crashed = cases[len(results)]
            raise protocol.KernelFault(f"kg_runner.exe crashed while running case {crashed.case_id!r} "
                                     f"({crashed.symbol}): {detail}")
        raise HarnessError(f"kg_runner.exe under Wine: exit {proc.returncode}: {detail}")
    if [r.case_id for r in results] != [c.case_id for c in cases]:
        raise HarnessError("kg_runner.exe output does not list the cases given")
    return results


def abi_capabilities_wine(workdir: Path) -> AbiCapabilities:
    """Asks ``kg_runner.exe`` under Wine which checks this CPU supports."""
    runner = build_runner_win64(Path(workdir))
    proc = run_wine(Path(workdir), [str(runner), "--caps"], 120.0)
    if proc.returncode != 0:
        raise HarnessError(f"kg_runner.exe --caps under Wine: exit {proc.returncode}: {proc.stderr.strip()}")
    return parse_capabilities(proc.stdout)
