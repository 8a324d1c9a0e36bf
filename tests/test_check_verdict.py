"""`kerngen check` says ok exactly for the sets `kerngen emit` builds: over
lane widths 16, 32 and 64, n a power of two from 2 to 4096, and each ISA
of the width alone or the shipped sets' list (avx512, avx2, sse). A set
check refuses, emit refuses with exit 2; a set it accepts builds.

Builds of valid sets failed in the builders and the passes up to
legalisation (a form the target cannot encode: a 32-bit broadcast on SSE at
n = 4096 was refused there); allocation and verification, which take
minutes at n = 4096, are left out: each set is built dry (`CompileCache(through=
"legalise")`), every kernel of every ISA. The suite draws a few sets with n
at most 256 beside the explicit n = 4096 SSE set: about 30 s of CPU in
all, 18 s of it that set (a whole build of it: 110 s). `KERNGEN_VERDICT_SETS=N`
draws N sets with n up to 4096 (a 64-bit set at n = 4096 takes minutes even
dry)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

from kerngen.commands.check import check_line
from kerngen.core.compile_cache import CompileCache
from kerngen.core.params import Overrides
from kerngen.errors import KerngenError
from kerngen.families import build_all, load

from test_property_sets import assert_refused, run_cli, toml

LARGE_RUN = int(os.environ.get("KERNGEN_VERDICT_SETS", "0"))
SUITE_EXAMPLES, SUITE_LOG_N = 10, 8
Q = {16: (3329, 7681, 12289), 32: (8380417, 2013265921), 64: (1125899906826241, 18446744069414584321)}
ISAS = {16: ("avx2", "avx512", "avx512vl", "sse"), 32: ("avx2", "avx512", "avx512vl", "sse"),
        64: ("avx2", "avx512", "avx512vl", "sse", "scalar")}
SHIPPED_ISAS = ["avx512", "avx2", "sse"]


@st.composite
def sets(draw, max_log_n: int) -> dict:
    width = draw(st.sampled_from(sorted(Q)))
    # small n favoured: each of 2..64 four times as likely as each larger one
    log_n = draw(st.sampled_from([k for k in range(1, max_log_n + 1) for _ in range(4 if k <= 6 else 1)]))
    isa = draw(st.sampled_from((*ISAS[width], SHIPPED_ISAS)))
    return {"name": "verdict", "family": "ntt", "n": 1 << log_n, "q": draw(st.sampled_from(Q[width])),
            "width": width, "isa": isa}


def builds(path) -> str | None:
    """None if every kernel of the set builds (dry), else why not."""
    try:
        build_all(load(path), CompileCache(through="legalise"))
    except KerngenError as e:
        return str(e)
    return None


@settings(max_examples=LARGE_RUN or SUITE_EXAMPLES, deadline=None, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=list(HealthCheck))
@given(table=sets(12 if LARGE_RUN else SUITE_LOG_N))
@example(table={"name": "verdict", "family": "ntt", "n": 4096, "q": 2013265921, "width": 32, "isa": "sse"})
def test_check_accepts_exactly_the_sets_that_build(table, tmp_path_factory):
    work = tmp_path_factory.mktemp("verdict")
    path = work / "set.toml"
    path.write_text(toml(table))
    valid, line = check_line(str(path), Overrides())
    if not valid:
        refused = assert_refused(*run_cli("emit", str(path), "--out", str(work / "out")), work / "out")
        assert line.removeprefix(f"{path}: error: ") in refused, (line, refused)
        return
    why = builds(path)
    assert why is None, f"check: {line}\nbut the build fails: {why}\n{toml(table)}"
