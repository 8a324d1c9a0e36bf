"""Python side of the C test and bench harness (C sources in ``harness/``,
shipped in the package as ``kerngen/csrc``).

The C programs know nothing of the mathematics: ``kg_runner`` places the
buffers, calls a kernel through the checked-call stub and prints what it
wrote; ``kg_bench`` times kernels. This module builds them, assembles emitted
bundles into shared objects, writes vector files, runs the programs and
parses what they print. File formats are documented in ``harness/vectors.h``
(vectors), ``harness/runner.c`` (runner output) and ``harness/bench.c``
(bench output).

Build products go to a caller-chosen work directory, keyed by a hash of
their inputs, so repeated calls reuse them and the repository stays clean.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING

# one class for the whole tool, so the CLI maps harness failures to exit code 2
from ..errors import HarnessError
from ..emission.files import write
from ..machine.formats import ELF64  # the harness loads kernels on this (Linux) machine
from ..emission.render import render

if TYPE_CHECKING:
    import numpy as np

    from ..core.bundle import Bundle

__all__ = [
    "HARNESS_DIR", "AbiCapabilities", "Arg", "BenchResult", "Case", "CaseResult", "HarnessError",
    "KernelFault", "abi_capabilities", "assemble_shared", "bundle_library", "tool", "build_batch", "build_bench", "build_runner", "build_shared_c", "cpu_flags",
    "element_bytes", "manifest_arg", "run_batch", "run_bench", "run_runner", "write_vectors",
]


def _harness_dir() -> Path:
    with as_file(files("kerngen") / "csrc") as path:  # a directory of the installed package
        return Path(path)


HARNESS_DIR = _harness_dir()

MAX_ARGS = 5
ROLES = ("in", "out", "inout")
ELEM_BYTES = (1, 2, 4, 8)
MAX_ALIGN = 4096

STATUS_OK = "ok"
STATUS_ABI = "abi"
STATUS_CANARY = "canary"
STATUS_INMOD = "inmod"

# kg_batch's exit status when a call broke the ABI or its buffers (harness/batch.c)
BATCH_FAULT_STATUS = 3


class KernelFault(HarnessError):
    """A kernel broke the calling convention or its buffers under the checked
    call, or crashed: a failed check of that kernel, not a failure of the
    harness (`kerngen test` counts it and goes on with the other checks)."""


_C_FLAGS = ("-O2", "-std=c11", "-Wall", "-Wextra")
_TOKEN = re.compile(r"^\S+$")
SYMBOL = re.compile(r"^[A-Za-z_.$][A-Za-z0-9_.$@]*$")

_INSTALL_HINTS = {
    "nasm": "install it with `apt-get install nasm` (NASM 2.14 or later)",
    "gcc": "install it with `apt-get install gcc`",
}


# ---------------------------------------------------------------------------
# records


@dataclass(frozen=True)
class Arg:
    """One pointer argument of a kernel, in C argument order.

    ``data`` holds the input values of an ``in``/``inout`` argument (any value
    in the signed or unsigned range of the element width); ``alias_of`` names
    the argument whose buffer this one shares (an in-place call), in which
    case this argument carries no data.
    """

    role: str
    elem_bytes: int
    count: int
    align: int
    data: tuple[int, ...] | None = None
    alias_of: int | None = None
    unsigned: bool = False  # elements read back as unsigned (the runner prints them signed)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Arg.role must be one of {ROLES}, got {self.role!r}")
        if self.elem_bytes not in ELEM_BYTES:
            raise ValueError(f"Arg.elem_bytes must be one of {ELEM_BYTES}, got {self.elem_bytes}")
        if self.count < 1:
            raise ValueError(f"Arg.count must be at least 1, got {self.count}")
        if self.align < 1 or self.align & (self.align - 1) or self.align > MAX_ALIGN:
            raise ValueError(f"Arg.align must be a power of two 1..{MAX_ALIGN}, got {self.align}")
        if self.data is not None:
            data = tuple(int(v) for v in self.data)
            object.__setattr__(self, "data", data)
            if len(data) != self.count:
                raise ValueError(f"Arg.data has {len(data)} values, count is {self.count}")
            bits = 8 * self.elem_bytes
            lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
            bad = next((v for v in data if not lo <= v <= hi), None)
            if bad is not None:
                raise ValueError(f"Arg.data value {bad} does not fit {self.elem_bytes} bytes")


@dataclass(frozen=True)
class Case:
    """One call: ``symbol`` from library number ``lib`` applied to ``args``."""

    case_id: str
    symbol: str
    args: tuple[Arg, ...]
    lib: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        if not _TOKEN.match(self.case_id):
            raise ValueError(f"Case.case_id must be one token without spaces, got {self.case_id!r}")
        if not SYMBOL.match(self.symbol):
            raise ValueError(f"case {self.case_id}: bad symbol name {self.symbol!r}")
        if self.lib < 0:
            raise ValueError(f"case {self.case_id}: lib must be >= 0")
        if not 1 <= len(self.args) <= MAX_ARGS:
            raise ValueError(f"case {self.case_id}: 1..{MAX_ARGS} arguments, got {len(self.args)}")
        for i, a in enumerate(self.args):
            where = f"case {self.case_id}: argument {i}"
            if a.alias_of is not None:
                j = a.alias_of
                if not 0 <= j < len(self.args) or j == i:
                    raise ValueError(f"{where}: alias_of {j} is not another argument")
                if self.args[j].alias_of is not None:
                    raise ValueError(f"{where}: alias_of {j}, which is itself an alias")
                if a.data is not None:
                    raise ValueError(f"{where}: an alias takes its data from argument {j}")
            elif a.role != "out" and a.data is None:
                raise ValueError(f"{where}: role {a.role} needs data")
            elif a.role == "out" and a.data is not None:
                raise ValueError(f"{where}: role out carries no data")


@dataclass(frozen=True)
class CaseResult:
    """Verdict of one case: ``status`` is ok, abi, canary or inmod; ``reason``
    the words after it (register names, or the argument index); ``outputs``
    maps each out/inout argument index to the values it held after the call."""

    case_id: str
    status: str
    reason: str
    outputs: dict[int, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK


@dataclass(frozen=True)
class BenchResult:
    """Ticks per call (TSC ticks, not core cycles) of one timed case."""

    case_id: str
    symbol: str
    median_ticks: float
    min_ticks: float
    batches: int
    calls_per_batch: int


@dataclass(frozen=True)
class AbiCapabilities:
    """What the checked call can detect on this machine."""

    avx: bool
    xinuse: bool  # missing-vzeroupper detection works only when True


# ---------------------------------------------------------------------------
# tools and builds


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
                                            "abi_check.h", "abi_check.asm")]
    key = digest(name, *_C_FLAGS, *(p.read_bytes() for p in sources))

    def make(tmp: Path) -> Path:
        obj = tmp / "abi_check.o"
        run_build([nasm, "-f", ELF64.name, "-o", obj, HARNESS_DIR / "abi_check.asm"],
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


def build_bench(workdir: Path) -> Path:
    """Compiles ``kg_bench`` into ``workdir`` (cached) and returns its path."""
    return _build_program(Path(workdir), "kg_bench", "bench.c")


def assemble_shared(asm_path: Path, workdir: Path) -> Path:
    """Assembles a NASM file as ELF, its symbols of default visibility, and
    links it into a shared object.

    The file's own directory is on the include path. The result is named
    after the file and a hash of its text, so distinct versions never clash.
    """
    asm_path = Path(asm_path)
    nasm, gcc = tool("nasm"), tool("gcc")
    try:
        text = asm_path.read_bytes()
    except OSError as exc:
        raise HarnessError(f"cannot read {asm_path}: {exc}") from exc

    def make(tmp: Path) -> Path:
        obj, so = tmp / f"{asm_path.stem}.o", tmp / f"{asm_path.stem}.so"
        # the harness looks the kernels up with dlsym: export them whatever the bundle's visibility
        run_build([nasm, "-f", ELF64.name, "-DKERNGEN_VISIBILITY=default", "-I", f"{asm_path.resolve().parent}/",
                   "-o", obj, asm_path], f"assembling {asm_path.name}")
        run_build([gcc, "-shared", "-o", so, obj], f"linking {asm_path.name}")
        return so

    return cached(Path(workdir) / f"{asm_path.stem}-{digest(text)}.so", make)


def bundle_library(bundle: Bundle, command: str, directory: Path, workdir: Path) -> Path:
    """A bundle built for this machine (System V, ELF) rendered into `directory`
    (its banners naming `command`) and assembled into a shared object."""
    write(render(bundle, command), directory)
    return assemble_shared(Path(directory) / bundle.target.platform.asm_file(bundle.name), workdir)


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


# ---------------------------------------------------------------------------
# vector files and program runs


def _symbol_token(case: Case) -> str:
    return case.symbol if case.lib == 0 else f"{case.lib}:{case.symbol}"


def write_vectors(path: Path, cases: Iterable[Case]) -> None:
    """Writes ``cases`` in the vector-file format of ``harness/vectors.h``."""
    lines: list[str] = []
    seen: set[str] = set()
    for c in cases:
        if c.case_id in seen:
            raise ValueError(f"duplicate case id {c.case_id!r}")
        seen.add(c.case_id)
        lines.append(f"case {c.case_id} {_symbol_token(c)} {len(c.args)}")
        for a in c.args:
            lines.append(f"arg {a.role} {a.elem_bytes} {a.count} {a.align}")
            if a.data is not None:
                lines.append("data " + " ".join(map(str, a.data)))
        for i, a in enumerate(c.args):
            if a.alias_of is not None:
                lines.append(f"alias {i} {a.alias_of}")
        lines.append("end")
    Path(path).write_text("\n".join(lines) + "\n")


def check_libs(libs: Path | Sequence[Path]) -> list[Path]:
    paths = [Path(libs)] if isinstance(libs, (str, os.PathLike)) else [Path(p) for p in libs]
    if not paths:
        raise HarnessError("no shared object given")
    for p in paths:
        if not p.is_file():
            raise HarnessError(f"shared object {p} does not exist")
    return [p.resolve() for p in paths]


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def parse_runner_output(text: str, cases: Sequence[Case]) -> list[CaseResult]:
    """The runner's verdicts and outputs, each output element as its argument
    reads it (the runner prints elements signed; unsigned arguments are masked back)."""
    args = {c.case_id: c.args for c in cases}
    results: list[CaseResult] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "case" and len(words) >= 3:
            results.append(CaseResult(words[1], words[2], " ".join(words[3:]), {}))
        elif words[0] == "out" and len(words) >= 2 and results:
            i, values = int(words[1]), [int(v) for v in words[2:]]
            given = args.get(results[-1].case_id, ())
            if i < len(given) and given[i].unsigned:
                values = [v & ((1 << (8 * given[i].elem_bytes)) - 1) for v in values]
            results[-1].outputs[i] = values
        else:
            raise HarnessError(f"runner output line {lineno} not understood: {line[:80]!r}")
    return results


def run_runner(
    lib: Path | Sequence[Path],
    cases: Sequence[Case],
    *,
    workdir: Path | None = None,
    seed: int | None = None,
    timeout: float = 300.0,
) -> list[CaseResult]:
    """Runs ``cases`` once each through ``kg_runner`` and returns their
    verdicts in order. ``lib`` is one shared object or a list (``Case.lib``
    indexes it). ``workdir`` holds the runner build (default: the first
    library's directory); ``seed`` fixes canaries and register seeds.
    A crash of a kernel raises KernelFault naming the case."""
    libs = check_libs(lib)
    runner = build_runner(Path(workdir) if workdir is not None else libs[0].parent)
    env = dict(os.environ)
    if seed is not None:
        env["KG_SEED"] = str(seed)
    else:
        env.pop("KG_SEED", None)
    with tempfile.TemporaryDirectory(prefix="kg-run-") as tmp_s:
        tmp = Path(tmp_s)
        vec, out = tmp / "vectors.txt", tmp / "output.txt"
        write_vectors(vec, cases)
        argv = [str(runner), *map(str, libs), str(vec), str(out)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"kg_runner timed out after {timeout} s") from exc
        text = out.read_text() if out.exists() else ""
    results = parse_runner_output(text, cases)
    if proc.returncode != 0:
        detail = proc.stderr.strip()
        if proc.returncode < 0 and len(results) < len(cases):
            # output is flushed per case: the first case without a verdict crashed
            crashed = cases[len(results)]
            raise KernelFault(f"kg_runner {_describe_exit(proc.returncode)} while running case "
                              f"{crashed.case_id!r} ({crashed.symbol}) {detail}".strip())
        raise HarnessError(f"kg_runner {_describe_exit(proc.returncode)}: {detail.strip()}")
    ids = [r.case_id for r in results]
    if ids != [c.case_id for c in cases]:
        raise HarnessError("kg_runner output does not list the cases given")
    return results


def run_bench(
    libs: Path | Sequence[Path],
    cases: Sequence[Case],
    batches: int = 101,
    *,
    workdir: Path | None = None,
    min_ticks: int = 2000,
    warmup_ticks: int = 2_000_000,
    calls_per_batch: int | None = None,
    timeout: float = 600.0,
) -> list[BenchResult]:
    """Times ``cases`` with ``kg_bench``, all interleaved in one run (one
    batch of each case per round), so ratios between them share the machine's
    noise. ``Case.lib`` indexes ``libs``. Returns one result per case."""
    paths = check_libs(libs)
    bench = build_bench(Path(workdir) if workdir is not None else paths[0].parent)
    if batches < 1:
        raise ValueError("batches must be at least 1")
    opts = ["-b", str(batches), "-t", str(min_ticks), "-w", str(warmup_ticks)]
    if calls_per_batch is not None:
        opts += ["-k", str(calls_per_batch)]
    with tempfile.TemporaryDirectory(prefix="kg-bench-") as tmp_s:
        vec = Path(tmp_s) / "vectors.txt"
        write_vectors(vec, cases)
        argv = [str(bench), *opts, "-v", str(vec), *map(str, paths)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"kg_bench timed out after {timeout} s") from exc
    if proc.returncode != 0:
        raise HarnessError(f"kg_bench {_describe_exit(proc.returncode)}: {proc.stderr.strip()}")
    results: list[BenchResult] = []
    for line in proc.stdout.splitlines():
        w = line.split()
        if not w or w[0].startswith("#"):
            continue
        if w[0] != "bench" or len(w) != 7:
            raise HarnessError(f"kg_bench output not understood: {line[:80]!r}")
        results.append(BenchResult(w[1], w[2], float(w[3]), float(w[4]), int(w[5]), int(w[6])))
    if [r.case_id for r in results] != [c.case_id for c in cases]:
        raise HarnessError("kg_bench output does not list the cases given")
    return results


def run_batch(lib: Path, symbol: str, args: Sequence[dict], dtype: str, inputs: dict[int, "np.ndarray"],
              workdir: Path, seed: int | None = None, timeout: float = 600.0) -> dict[int, "np.ndarray"]:
    """Calls `symbol` once per row of the input arrays, through the checked
    call, with binary input and output (``harness/batch.c``).

    `args` are the function's manifest argument entries; `inputs` maps every
    in/inout argument index to an array of shape (records, count). Returns the
    out/inout arguments after each call, by index, in the same shape. A call
    that breaks the ABI or its buffers, or crashes, raises KernelFault naming
    the record."""
    import numpy as np

    width = element_bytes(dtype)
    kind = np.dtype(f"<{'u' if dtype.startswith('u') or width == 8 else 'i'}{width}")
    records = len(next(iter(inputs.values())))
    words = [f"{a['role']}:{width}:{a['count']}:{a['align']}" for a in args]
    batch = build_batch(Path(workdir))
    env = dict(os.environ)
    env.pop("KG_SEED", None)
    if seed is not None:
        env["KG_SEED"] = str(seed)
    with tempfile.TemporaryDirectory(prefix="kg-batch-") as tmp_s:
        tmp = Path(tmp_s)
        parts = [np.asarray(inputs[i]).astype(kind, casting="unsafe").reshape(records, a["count"])
                 for i, a in enumerate(args) if a["role"] != "out"]
        np.concatenate(parts, axis=1).tofile(tmp / "in.bin")
        argv = [str(batch), str(Path(lib).resolve()), symbol, str(records), str(tmp / "in.bin"), str(tmp / "out.bin"),
                *words]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"kg_batch timed out after {timeout} s") from exc
        if proc.returncode == BATCH_FAULT_STATUS or proc.returncode < 0:
            raise KernelFault(f"{symbol} under the checked call: {_batch_fault(proc.stdout, proc.returncode)}")
        if proc.returncode != 0:
            raise HarnessError(f"kg_batch {_describe_exit(proc.returncode)} on {symbol}: "
                               f"{(proc.stdout + proc.stderr).strip()}")
        raw = np.fromfile(tmp / "out.bin", dtype=kind)
    outs = [i for i, a in enumerate(args) if a["role"] != "in"]
    widths = [args[i]["count"] for i in outs]
    rows = raw.reshape(records, sum(widths))
    result, at = {}, 0
    for i, w in zip(outs, widths):
        result[i] = rows[:, at:at + w].astype(np.int64) if width < 8 else rows[:, at:at + w]
        at += w
    return result


def _batch_fault(stdout: str, code: int) -> str:
    """kg_batch's report of a broken call ("record K abi|canary|inmod DETAILS") in words."""
    words = stdout.split()
    if code < 0 or len(words) < 3 or words[0] != "record":
        return f"kg_batch {_describe_exit(code)} {stdout.strip()}".strip()
    what = {"abi": "breaks the ABI:", "canary": "writes outside argument", "inmod": "modifies its input argument"}
    return f"call {words[1]} {what.get(words[2], words[2])} {' '.join(words[3:])}".strip()


def element_bytes(dtype: str) -> int:
    """Bytes of a manifest `dtype` (int16, uint64, ...)."""
    return int("".join(c for c in dtype if c.isdigit())) // 8


def manifest_arg(arg: dict, dtype: str, data: Iterable[int] | None = None, alias_of: int | None = None,
                 fastest: bool = False) -> Arg:
    """A harness argument for one entry of a manifest function's `args`, placed
    at exactly its required alignment (tests), or at its preferred one (`fastest`: timing)."""
    align = arg.get("preferred_align", arg["align"]) if fastest else arg["align"]
    return Arg(arg["role"], element_bytes(dtype), arg["count"], align, None if data is None else tuple(data), alias_of,
               dtype.startswith("u"))


def cpu_flags() -> set[str]:
    """This machine's CPU feature flags, as /proc/cpuinfo names them (avx2, pclmulqdq, sse4_1, ...)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return {_CPUINFO_ALIASES.get(f, f) for f in line.split(":", 1)[-1].split()}


_CPUINFO_ALIASES = {"pni": "sse3"}  # /proc/cpuinfo's names that differ from the extensions' own


def abi_capabilities(workdir: Path) -> AbiCapabilities:
    """Asks the runner which checks this CPU supports."""
    runner = build_runner(Path(workdir))
    proc = subprocess.run([str(runner), "--caps"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise HarnessError(f"kg_runner --caps {_describe_exit(proc.returncode)}: {proc.stderr}")
    caps = dict(line.split() for line in proc.stdout.splitlines() if line.strip())
    return AbiCapabilities(avx=caps.get("avx") == "1", xinuse=caps.get("xinuse") == "1")

