"""The `kerngen` command line. Errors go to stderr with exit code 2."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from . import __version__, emit
from .errors import KerngenError, ParamError
from .families import build, checks_module
from .params import POLICIES, REDUCERS, load

REPO = Path(__file__).resolve().parents[2]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _display_path(path: str) -> str:
    """A path for the reproduce-command: relative, never absolute (no host details in output)."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.name


def _load_all(paths, args) -> list:
    loaded = []
    for path in paths:
        p = load(path, policy=getattr(args, "policy", None), prefix=getattr(args, "prefix", None),
                 reducer=getattr(args, "reducer", None))
        isa = getattr(args, "isa", None)
        if isa is not None and isa != p.isa:
            if p.family == "ntt" and isa != "avx2":
                raise ParamError(str(path), "isa", f'must be "avx2" for the ntt family, got {isa!r} from --isa')
            p = type(p)(**{**p.__dict__, "isa": isa}) if p.family == "gf2m" else p
        loaded.append(p)
    return loaded


def cmd_emit(args) -> int:
    params = _load_all(args.params, args)
    several = len(params) > 1
    staged = []
    for path, p in zip(args.params, params):  # build and verify everything before writing anything
        out = Path(args.out) / p.name if several else Path(args.out or p.name)
        # the output directory changes nothing in the files, so it is not part of the command
        command = f"kerngen emit {_display_path(path)}"
        for flag in ("isa", "policy", "reducer", "prefix"):
            if getattr(args, flag) is not None:
                command += f" --{flag} {getattr(args, flag)}"
        _say(f"{p.name}: building and verifying kernels")
        staged.append((out, emit.render(build(p), command)))
    for out, files in staged:
        for written in emit.write(files, out):
            print(written)
    return 0


def cmd_test(args) -> int:
    from .testing import test_params
    passed = failed = 0
    for p in _load_all(args.params, args):
        outcome = test_params(p, args.seed, _say)
        passed += outcome.passed
        failed += outcome.failed
        for f in outcome.failures:
            print(f"FAIL {f}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def cmd_bench(args) -> int:
    from .bench import bench_bundle
    from .testing import bundle_library
    rows = []
    with tempfile.TemporaryDirectory(prefix="kerngen-bench-") as tmp:
        work = Path(tmp)
        for p in _load_all(args.params, args):
            bundle, lib = bundle_library(p, work)
            module = checks_module(p.family)
            items = module.bench_items(bundle, work)
            _say(f"{p.name}: timing {len(items)} kernels ({args.batches} batches each, interleaved)")
            rows += bench_bundle(bundle, lib, items, work, args.batches)
            extra = getattr(module, "extra_bench_rows", None)
            if extra is not None:
                _say(f"{p.name}: timing whole-algorithm demonstrators")
                rows += extra(bundle, lib, work, args.batches)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    cols = [("name", 14), ("kind", 18), ("ticks", 9)]
    others = sorted({k for r in rows for k in r if k.endswith("_ticks") and k != "ticks"})
    cols += [(k, 15) for k in others] + [(k.replace("_ticks", "_ratio"), 15) for k in others]
    cols += [("instructions", 13), ("bytes", 7), ("multiplications", 16), ("loads", 6), ("stores", 7),
             ("mca_rthroughput", 16), ("mca_rthroughput_skylake", 24)]
    print("".join(f"{c:>{w}}" for c, w in cols))
    for r in rows:
        print("".join(f"{_fmt(r.get(c)):>{w}}" for c, w in cols))
    print("ticks: TSC ticks per call, median over batches of back-to-back calls; ratio = comparison / kerngen")
    return 0


def cmd_explore(args) -> int:
    from .explore import explore, format_table, load_ntt
    p = load_ntt(args.params)  # refuse other families before any work
    png = Path(args.png) if args.png else Path(f"explore-{p.name}.png")
    rows, failures = explore(args.params, args.batches, png, _say, check=args.check, seed=args.seed)
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    _say(f"{p.name}: heatmap written to {png}")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


def _fmt(v) -> str:
    return "-" if v is None else str(v)


def cmd_list(args) -> int:
    for path in sorted((REPO / "params").glob("*.toml")):
        p = load(path)
        if p.family == "ntt":
            what = f"ntt   n={p.n:<5} q={p.q:<6} width={p.width} layers={p.layers} d={p.d} isa={p.isa} reduction={p.policy} reducer={p.reducer}"
        else:
            what = f"gf2m  m={p.m:<4} poly={list(p.poly)} isa={p.isa}"
        print(f"{p.name:<16} {what}   params/{path.name}")
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="kerngen",
        description="Generate fully unrolled, verified AVX2 NASM kernels (NTTs, reductions, GF(2^m) arithmetic) "
                    "from parameter files.")
    ap.add_argument("--version", action="version", version=f"kerngen {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(p, out: bool = False):
        p.add_argument("params", nargs="+", metavar="PARAMS.toml", help="parameter file(s), e.g. params/kyber-3329.toml")
        p.add_argument("--isa", choices=("avx2", "sse"), help="override the file's isa")
        p.add_argument("--policy", choices=POLICIES, help="reduction policy for NTT kernels (default: the file's, else index)")
        p.add_argument("--reducer", choices=REDUCERS,
                       help="reduction used by NTT schedules: barrett, special (shifts and adds, for q of sparse "
                            "signed-binary shape such as 7681 = 2^13 - 2^9 + 1) or auto (cheapest by the cost model)")
        p.add_argument("--prefix", help="symbol prefix (default: kg_ and the name without dashes)")

    e = sub.add_parser("emit", help="write the bundle (.asm, .h, manifest.json) of each parameter set",
                       description="Build, verify and write each bundle. With one parameter file, --out is the bundle "
                                   "directory (default ./NAME); with several, bundles go to --out/NAME. Nothing is "
                                   "written unless every kernel verified.")
    common(e)
    e.add_argument("--out", metavar="DIR", help="output directory")
    e.set_defaults(func=cmd_emit)

    t = sub.add_parser("test", help="emit, assemble and test against SymPy references; ends with 'N passed, N failed'")
    common(t)
    t.add_argument("--seed", type=int, default=1, help="seed of random inputs, canaries and register fill (default 1)")
    t.set_defaults(func=cmd_test)

    b = sub.add_parser("bench", help="ticks per call beside the comparison code, with static figures")
    common(b)
    b.add_argument("--json", action="store_true", help="print rows as JSON")
    b.add_argument("--batches", type=int, default=101, help="batches per kernel (median taken; default 101)")
    b.set_defaults(func=cmd_bench)

    x = sub.add_parser("explore", help="reduction policies and reductions side by side, with a PNG of the bounds",
                       description="Build and verify every reduction policy with every reduction that applies to "
                                   "q (NTT parameter sets only); print reductions inserted, instructions, "
                                   "multiplications, llvm-mca throughput, ticks (all variants timed in one "
                                   "interleaved run) and the worst bound after each layer; write a PNG heatmap of "
                                   "the bound of every coefficient index through the layers, reductions outlined.")
    x.add_argument("params", metavar="PARAMS.toml", help="an NTT parameter file, e.g. params/kyber-r1-7681.toml")
    x.add_argument("--json", action="store_true", help="print rows as JSON")
    x.add_argument("--png", metavar="FILE", help="heatmap file (default: ./explore-NAME.png)")
    x.add_argument("--batches", type=int, default=101, help="batches per kernel (median taken; default 101)")
    x.add_argument("--check", action="store_true",
                   help="also run every variant against SymPy references (as `kerngen test` does)")
    x.add_argument("--seed", type=int, default=1, help="seed of the --check inputs (default 1)")
    x.set_defaults(func=cmd_explore)

    ls = sub.add_parser("list", help="the shipped parameter sets")
    ls.set_defaults(func=cmd_list)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except KerngenError as e:
        print(f"kerngen: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
