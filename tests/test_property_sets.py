"""Every validated parameter set emits: drawn NTT sets over n from 2 to 4096,
lane widths 16/32/64, every ISA, order, multiplication, layers, policy,
reducer and output range. Each is either refused by validation (the checks
`emit` runs before it builds any kernel) with exit 2, one line naming the
key and nothing written, or emitted (every kernel verified). A traceback,
or a refusal after validation, fails.

The suite draws a few dozen examples with n at most 64 beside the seeds
(sets that once failed), the 32- and 64-bit q among the seeds'; `KERNGEN_PROPERTY_SETS=N` draws N (random, n up to
4096, no shrinking) for a larger run, and `KERNGEN_PROPERTY_LOG=FILE`
appends each set's outcome to FILE as JSON lines.

32-bit q near 2^31 is left out (below 2^30 here): its own rules are
another matter. q is drawn mostly as k*2^v + 1, so that most sets have the
layers they ask for, and sometimes as any prime, which validation may refuse.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import tempfile
import time
from itertools import chain, islice
from pathlib import Path

import sympy
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

from kerngen.cli import main
from kerngen.errors import ParamError
from kerngen.families import load
from kerngen.families.ntt.params import MONTGOMERY_WIDTHS, MULS, ORDERS, OUTPUT_KERNELS, OUTPUTS, POLICIES, REDUCERS

LARGE_RUN = int(os.environ.get("KERNGEN_PROPERTY_SETS", "0"))
LOG = os.environ.get("KERNGEN_PROPERTY_LOG")
SUITE_EXAMPLES = 24
SUITE_LOG_N = 6  # n at most 64 in the suite; the larger run draws up to 4096
SUITE_Q = {32: (8380417, 5929537, 548076289), 64: (79249460751830849,)}  # the seeds' (their proofs are made once)
Q_RANGE = {16: (3, 1 << 15), 32: (1 << 20, 1 << 30), 64: (1 << 32, 1 << 62)}  # [lo, hi) drawn per lane width
ISA_NAMES = ("avx2", "sse", "scalar", "auto")


def _prime_from(lo: int, hi: int, step: int, start: int) -> int | None:
    """A prime q = 1 mod step in [lo, hi), the first from `start` on (wrapping), or None."""
    first = max(lo, start) // step * step + 1
    for cand in chain(islice(range(first, hi, step), 400), islice(range(lo // step * step + 1, first, step), 400)):
        if cand >= lo and sympy.isprime(cand):
            return cand
    return None


@st.composite
def parameter_sets(draw, max_log_n: int = 12, q_pool: dict[int, tuple[int, ...]] | None = None) -> dict:
    """A table of NTT keys. `q_pool`: the q drawn from, per lane width, where
    given (each new q of 32 or 64 bits costs seconds of SMT proofs)."""
    width = draw(st.sampled_from((16, 32, 64)))
    # small n favoured: each of 2..64 four times as likely as each of 128..4096
    log_n = draw(st.sampled_from([k for k in range(1, max_log_n + 1) for _ in range(4 if k <= 6 else 1)]))
    n = 1 << log_n
    lo, hi = Q_RANGE[width]
    fewest = max(1, log_n - 3)
    if q_pool and width in q_pool:
        q = draw(st.sampled_from(q_pool[width]))
    elif draw(st.integers(0, 4)):  # 2^v | q - 1 for v giving the layers a set asks for, or one short
        v = draw(st.integers(fewest, log_n + 1))
        start = draw(st.integers(lo, hi - 1))
        q = _prime_from(lo, hi, 1 << v, start) or int(sympy.prevprime(hi))
    else:
        q = int(sympy.nextprime(draw(st.integers(lo, hi - 2))))
        q = q if q < hi else int(sympy.prevprime(hi))
    table: dict = {"name": "drawn", "family": "ntt", "n": n, "q": q, "width": width}
    # mostly what the lane width allows (else nearly every set would be refused), sometimes anything
    anything = draw(st.integers(0, 5)) == 0
    signed = width in MONTGOMERY_WIDTHS
    isas = draw(st.lists(st.sampled_from(ISA_NAMES if anything or not signed else ("avx2", "sse", "auto")),
                         min_size=1, max_size=3 if anything else 2, unique=True))
    if not anything and "auto" in isas:
        isas = ["auto"]
    table["isa"] = isas[0] if len(isas) == 1 else isas
    optional = {
        "layers": st.integers(max(1, fewest - 1), log_n),
        "reduction": st.sampled_from(POLICIES),
        "reducer": st.sampled_from(REDUCERS if anything or signed else REDUCERS[:1]),
        "mul": st.sampled_from(MULS if anything or signed else ("auto", "shoup")),
        "order": st.sampled_from(ORDERS),
        "output": st.one_of(st.sampled_from(OUTPUTS),
                            st.fixed_dictionaries({}, optional={k: st.sampled_from(OUTPUTS) for k in OUTPUT_KERNELS})),
        "basemul_acc": st.lists(st.integers(2, 4), min_size=1, max_size=2, unique=True),
    }
    for key, values in optional.items():
        if draw(st.booleans()):
            table[key] = draw(values)
    return table


def toml(table: dict) -> str:
    def value(v) -> str:
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return str(v)
    return "".join(f"{k} = {value(v)}\n" for k, v in table.items())


def run_cli(*args: str) -> tuple[int, str]:
    """The command line in this process: (exit code, stderr). Anything but
    kerngen's own errors escapes as the traceback a user would see."""
    logger = logging.getLogger("kerngen")
    handlers = list(logger.handlers)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            for h in handlers:  # progress lines go to the captured stderr too
                logger.removeHandler(h)
            code = main(list(args))
    finally:
        for h in list(logger.handlers):
            logger.removeHandler(h)
        for h in handlers:
            logger.addHandler(h)
    return code, err.getvalue()


def assert_refused(code: int, err: str, out: Path) -> str:
    """Exit 2, one line naming the file and a key, nothing written; the line."""
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("kerngen: error: "), (code, err)
    assert not out.exists(), f"a refused set left {out}"
    return lines[0]


def emit_outcome(table: dict, work: Path) -> str:
    """"refused" (by validation, as the command line reports it) or "emitted";
    fails on anything else."""
    path = work / "set.toml"
    path.write_text(toml(table))
    out = work / "out"
    try:
        load(path)
        validated = True
    except ParamError:
        validated = False
    code, err = run_cli("emit", str(path), "--out", str(out))
    if not validated:
        line = assert_refused(code, err, out)
        assert f"{path}: " in line, line  # names the file, then the key
        return "refused"
    assert code == 0, f"refused after validation:\n{toml(table)}{err}"
    assert (out / "manifest.json").is_file()
    return "emitted"


def _record(table: dict, outcome: str, seconds: float) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps({"set": table, "outcome": outcome, "seconds": round(seconds, 1)}) + "\n")


SEEDS = [  # sets that validated and then did not build, or whose explicit choices were ignored
    {"name": "s", "family": "ntt", "n": 8, "q": 8380417, "width": 32, "isa": "avx2"},
    {"name": "s", "family": "ntt", "n": 16, "q": 8380417, "width": 32, "isa": ["avx2", "sse"], "order": "natural",
     "layers": 2},
    {"name": "s", "family": "ntt", "n": 64, "q": 79249460751830849, "width": 64, "isa": "avx2", "order": "natural"},
    {"name": "s", "family": "ntt", "n": 64, "q": 79249460751830849, "width": 64, "isa": "avx2",
     "reducer": "barrett", "order": "natural"},
    {"name": "s", "family": "ntt", "n": 64, "q": 548076289, "width": 32, "isa": "sse", "mul": "shoup",
     "order": "standard", "layers": 5},
    {"name": "s", "family": "ntt", "n": 64, "q": 5929537, "width": 32},
    {"name": "s", "family": "ntt", "n": 2, "q": 8380417, "width": 32},
    {"name": "s", "family": "ntt", "n": 512, "q": 12289, "reducer": "special"},
    {"name": "s" * 300, "family": "ntt", "n": 64, "q": 257},
    {"name": "s", "family": "ntt", "n": 2, "q": 79249460751830849, "width": 64, "isa": "auto"},
    {"name": "s", "family": "ntt", "n": 2, "q": 79249460751830849, "width": 64, "isa": "scalar"},
]


def _with_seeds(test):
    for seed in reversed(SEEDS):
        test = example(seed)(test)
    return test


@_with_seeds
@settings(max_examples=LARGE_RUN or SUITE_EXAMPLES, suppress_health_check=list(HealthCheck),
          **({"derandomize": False, "phases": [Phase.explicit, Phase.generate], "database": None}
             if LARGE_RUN else {}))
@given(parameter_sets(max_log_n=12, q_pool=None) if LARGE_RUN else parameter_sets(SUITE_LOG_N, SUITE_Q))
def test_every_set_is_refused_by_validation_or_emits(table):
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kerngen-property-") as tmp:
        try:
            outcome = emit_outcome(table, Path(tmp))
        except BaseException as e:
            _record(table, f"FAILED {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                    time.monotonic() - start)
            raise
    _record(table, outcome, time.monotonic() - start)
