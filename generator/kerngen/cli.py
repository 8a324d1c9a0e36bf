"""The `kerngen` command line: parsing, and dispatch to `commands`.
Errors go to stderr with exit code 2; Ctrl-C ends any command with exit
code 130 and one line. The families and the commands (SymPy, numpy, z3)
are imported when `main` runs, not with this module, so that an interrupt
during those imports is an interrupt too."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from . import __version__
from .errors import KerngenError, ParamError, UsageError
from .core.manifest import is_bundle
from .emission.files import check_new_file
from .core.params import ABIS, Overrides
from .machine.isa import ISAS
from .machine.target import PLATFORMS, VISIBILITIES


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _override_names() -> tuple[str, ...]:
    """The options that replace keys of the parameter files, in the order the reproduce-command gives them."""
    from .families import OPTIONS
    return ("isa", "abi", "visibility", *(o.name for o in OPTIONS), "prefix")


def _overrides(args) -> Overrides:
    return Overrides.of(**{k: getattr(args, k, None) for k in _override_names()})


def _load_all(args) -> list[tuple[object, str]]:
    """(params, the file as the reproduce-command spells it) for each PARAMS argument."""
    from .commands import shipped
    from .families import load
    out = []
    for arg in args.params:
        path, shown = shipped.resolve(arg)
        out.append((load(path, _overrides(args)), shown))
    return out


def cmd_selfcheck(args) -> int:
    from .commands.selfcheck import run_selfcheck

    kernels = args.kernels if args.kernels is not None else (Path("generated") if Path("generated").is_dir() else None)
    if kernels is not None and not kernels.is_dir():
        raise UsageError(f"--kernels {kernels}: no such directory")
    with tempfile.TemporaryDirectory(prefix="kerngen-selfcheck-") as tmp:
        return run_selfcheck(Path(tmp), kernels, args.seed)


def cmd_emit(args) -> int:
    from .commands.emit import emit
    flags = "".join(f" --{k} {getattr(args, k)}" for k in _override_names() if getattr(args, k) is not None)
    for written in emit(_load_all(args), args.out, flags, args.force, _say):
        print(written)
    return 0


def cmd_check(args) -> int:
    from .commands.check import check
    return check(args.params, _overrides(args), print)


def cmd_test(args) -> int:
    from .commands import shipped
    from .commands.test import test_bundle, test_params
    from .families import load
    from .store import Store
    passed = failed = 0
    for arg in args.params:
        if is_bundle(Path(arg)):
            given = [f"--{k}" for k in _override_names() if getattr(args, k) is not None]
            if given:
                raise UsageError(f"{', '.join(given)}: settings for parameter files; {arg} is an emitted bundle")
            outcome = test_bundle(Path(arg), args.seed, _say, on_model=args.on_model)
        else:
            path, _ = shipped.resolve(arg, bundles=True)
            outcome = test_params(load(path, _overrides(args)), args.seed, _say, on_model=args.on_model,
                                  store=Store.default())
        passed += outcome.passed
        failed += outcome.failed
        for f in outcome.failures:
            print(f"FAIL {f}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def cmd_bench(args) -> int:
    from .commands.bench import bench_bundle, format_table
    from .commands.test import bundle_library
    from .families import family_of
    from .harness.cpu import left_out
    sections = []
    with tempfile.TemporaryDirectory(prefix="kerngen-bench-") as tmp:
        work = Path(tmp)
        for p, _ in _load_all(args):
            family = family_of(p)
            bundle, lib = bundle_library(p, work)
            skipped = left_out(bundle.functions)
            if skipped:
                _say(f"{p.name}: {skipped}: not timed")
            items = family.bench_items(bundle, lib, work)
            _say(f"{p.name}: timing {len(items)} kernels ({args.batches} batches each, interleaved)")
            rows = bench_bundle(bundle, lib, items, work, args.batches)
            extra = family.extra_bench_rows(bundle, lib, work, args.batches)
            if extra:
                _say(f"{p.name}: timed whole-algorithm demonstrators")
            sections.append((p.name, p.prefix, rows + extra))
    if args.json:
        print(json.dumps([row for _, _, rows in sections for row in rows], indent=2))
    else:
        print("\n".join(format_table(sections)))
    return 0


def cmd_explore(args) -> int:
    from .commands import shipped
    from .families import FAMILIES, family_of, load
    path, _ = shipped.resolve(args.params)
    if args.isa is not None and "," in args.isa:
        raise UsageError(f"explore: --isa takes one ISA, got {args.isa!r}")
    p = load(path, Overrides(isa=args.isa))
    explorer = family_of(p).explorer
    if explorer is None:  # refuse other families before any work
        with_schedules = " or ".join(f'"{f.name}"' for f in FAMILIES.values() if f.explorer is not None)
        raise ParamError(str(path), "family",
                         f'explore compares NTT reduction schedules and needs family = {with_schedules}, '
                         f'got "{p.family}"')
    png = Path(args.png) if args.png else Path(f"explore-{p.name}.png")
    check_new_file(png, "--png")
    tester = None
    if args.check:
        from .commands.test import test_params as tester
    rows, failures = explorer.explore(p, args.batches, png, _say, tester=tester, seed=args.seed)
    print(json.dumps(rows, indent=2) if args.json else explorer.format_table(rows))
    _say(f"{p.name}: heatmap written to {png}")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


def cmd_list(args) -> int:
    from .commands import shipped
    print("\n".join(shipped.list_lines()))
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    from .families import OPTIONS
    ap = argparse.ArgumentParser(
        prog="kerngen",
        description="Generate verified x86-64 NASM kernels (AVX-512, AVX2, SSE, scalar: NTTs up to 2^24 "
                    "coefficients, reductions, GF(2^m) arithmetic) "
                    "from parameter files.")
    ap.add_argument("--version", action="version", version=f"kerngen {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    params_help = ("parameter file(s), e.g. params/kyber-3329.toml; the name of a shipped set (kerngen list) "
                   "works from any directory")

    def common(p):
        p.add_argument("params", nargs="+", metavar="PARAMS.toml", help=params_help)
        p.add_argument("--isa", metavar="ISA[,ISA]", help=f"override the file's isa: one of {', '.join(ISAS)}, or "
                                                             "several separated by commas (one bundle with kernels "
                                                             "for each and a dispatch unit), or auto (NTT family: "
                                                             "the ISAs measured worth shipping for the lane width)")
        for o in OPTIONS:  # the families' own
            p.add_argument(f"--{o.name}", dest=o.name, choices=o.choices, help=o.help)
        p.add_argument("--prefix", help="symbol prefix (default: kg_ and the name without dashes)")

    def platforms(p):
        p.add_argument("--abi", metavar="ABI[,ABI]",
                       help="override the file's abi: one of "
                            + ", ".join(f"{p.name} ({p.abi.title}, {p.fmt.name} objects)" for p in PLATFORMS.values())
                            + ", or several separated by commas: one .asm file each ("
                            + ", ".join(p.asm_file("NAME") for p in PLATFORMS.values()) + f"); default {ABIS[0]}")
        p.add_argument("--visibility", choices=VISIBILITIES,
                       help="visibility of the exported symbols in ELF and Mach-O objects: hidden (default: "
                            "callable from what links the object, never exported from it) or default (exported "
                            "from a shared library)")

    e = sub.add_parser("emit", help="write the bundle (.asm per ABI, .h, manifest.json, README.md and build files; "
                                    "NAME_dispatch.c for several ISAs) of each parameter set",
                       description="Build, verify and write each bundle. With one parameter file, --out is the bundle "
                                   "directory (default ./NAME); with several, bundles go to --out/NAME. Nothing is "
                                   "written unless every kernel verified.")
    common(e)
    platforms(e)
    e.add_argument("--out", metavar="DIR", help="output directory")
    e.add_argument("--force", action="store_true",
                   help="replace an output directory and everything in it even if it holds something other than "
                        "this set's bundle: no kerngen bundle, another set's bundle, or files the bundle's manifest "
                        "does not list (without --force these are refused and nothing is touched; the same set's "
                        "bundle is always replaced whole)")
    e.set_defaults(func=cmd_emit)

    k = sub.add_parser("check", help="validate parameter files without building kernels; one line each (ok, "
                                     "with what was chosen, or the error)",
                       description="Run only the validation that emit runs before it builds any kernel: the "
                                   "file's schema, the bound analysis (a reduction schedule that keeps every lane "
                                   "in range), the choice of multiplication and reduction, and the lemmas the "
                                   "kernels rest on. Prints one line per file: 'FILE: ok: NAME: ...' with the "
                                   "lanes, layers and, per ISA, the multiplication and reduction chosen, or "
                                   "'FILE: error: KEY: RULE'. A set that checks emits. Exit code 1 if any file "
                                   "is refused.")
    common(k)
    platforms(k)
    k.set_defaults(func=cmd_check)

    t = sub.add_parser("test", help="emit, assemble and test against independent references; ends with 'N passed, N failed'",
                       description="Test each parameter set (emitted into a temporary directory, its kernels "
                                   "built once into the bundle store: $KERNGEN_STORE, else ~/.cache/kerngen/bundles) "
                                   "or each bundle directory (or its manifest.json) emitted earlier or copied into "
                                   "another project: "
                                   "every function is called through the C harness with random and worst-case inputs "
                                   "of its contract and judged from the manifest alone. The ELF object runs here; "
                                   "a Windows object runs under Wine (when wine and MinGW-w64 are installed); "
                                   "a Mach-O object is assembled and read back with llvm-nm and llvm-objdump. "
                                   "Functions this CPU cannot run are run on the machine model (the instruction "
                                   "table's semantics, which the verifier proves kernels by) instead.")
    common(t)
    platforms(t)
    t.add_argument("--seed", type=int, default=1, help="seed of random inputs, canaries and register fill (default 1)")
    t.add_argument("--on-model", action="store_true",
                   help="run every check on the machine model instead of the CPU (each function read back from the "
                        "bundle's own assembly)")
    t.set_defaults(func=cmd_test)

    b = sub.add_parser("bench", help="ticks per call beside the comparison code, with static figures")
    common(b)
    b.add_argument("--json", action="store_true", help="print rows as JSON")
    b.add_argument("--batches", type=_positive, default=101, help="batches per kernel (median taken; default 101)")
    b.set_defaults(func=cmd_bench)

    x = sub.add_parser("explore", help="reduction policies and reductions side by side, with a PNG of the bounds",
                       description="Build and verify every reduction policy with every reduction that applies to "
                                   "q (NTT parameter sets only); print reductions inserted, instructions, "
                                   "multiplications, llvm-mca throughput, ticks (all variants timed in one "
                                   "interleaved run) and the worst bound after each layer; write a PNG heatmap of "
                                   "the bound of every coefficient index through the layers, reductions outlined.")
    x.add_argument("params", metavar="PARAMS.toml", help="an NTT parameter file, e.g. params/kyber-r1-7681.toml")
    x.add_argument("--isa", metavar="ISA", help=f"the ISA to explore on: one of {', '.join(ISAS)} (default: the "
                                                "file's first)")
    x.add_argument("--json", action="store_true", help="print rows as JSON")
    x.add_argument("--png", metavar="FILE", help="heatmap file (default: ./explore-NAME.png)")
    x.add_argument("--batches", type=_positive, default=101, help="batches per kernel (median taken; default 101)")
    x.add_argument("--check", action="store_true",
                   help="also run every variant against SymPy references (as `kerngen test` does)")
    x.add_argument("--seed", type=int, default=1, help="seed of the --check inputs (default 1)")
    x.set_defaults(func=cmd_explore)

    c = sub.add_parser("selfcheck", help="run every form of the instruction table on this CPU and compare it with "
                                         "the table's semantics; ends with 'N passed, N failed, N skipped'",
                       description="Every form of the instruction table (each row's legacy, VEX and EVEX forms at "
                                   "each register width) that has lane semantics is assembled into a one-instruction "
                                   "function and run on this CPU on random and edge inputs (every lane; signed and "
                                   "unsigned extremes; shift counts at and above the lane width; the immediates of "
                                   "the shipped kernels and random ones; masks all zeros, all ones and mixed), and "
                                   "its results compared with the semantics the verifier reads (element-wise "
                                   "arithmetic, lane moves, widening products, and the block semantics the model runs: "
                                   "carry-less products, byte look-ups and affine maps, sums of products). Each "
                                   "mismatch is printed with a "
                                   "witness; forms needing extensions this CPU lacks are skipped and named (they do "
                                   "not count as passed); rows without lane semantics are listed as not modelled. "
                                   "Exit code 1 on any failure.")
    c.add_argument("--kernels", type=Path, metavar="DIR",
                   help="bundles whose kernels' immediates are run besides the edge and random ones (default: "
                        "./generated if it exists)")
    c.add_argument("--seed", type=int, default=1, help="seed of random inputs and immediates (default 1)")
    c.set_defaults(func=cmd_selfcheck)

    ls = sub.add_parser("list", help="the shipped parameter sets")
    ls.set_defaults(func=cmd_list)
    return ap


def _report_progress() -> None:
    """What the library reports of long steps (`kerngen.progress`) to stderr, like `_say`."""
    log = logging.getLogger("kerngen")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        _report_progress()
        from .harness.cpu import cpu_mask
        cpu_mask()  # a mask that cannot be read is refused before any work
        return args.func(args)
    except KerngenError as e:
        print(f"kerngen: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("kerngen: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # the reader went away (| head): say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


INTERRUPTED = 130


def run() -> None:
    """The process's entry point (`kerngen`, `python -m kerngen`): `main`'s exit code. After an interrupt the
    process ends at once, its streams flushed: an interrupt that lands in code a C extension runs through
    the interpreter's PyRun_* calls during the imports leaves CPython set to raise SIGINT again as it
    finalises, which would end the process by the signal (status -2) whatever `main` returned."""
    code = main()
    if code == INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
