"""`kerngen check` (validation alone), validation's time on the sets a new
user brings, and the bound analysis's answer to a q too large: the largest
q whose worst case fits, bisected, against every q tried in turn."""

from __future__ import annotations

import logging
import re
import time

import pytest
import sympy

from kerngen.core.params import Overrides
from kerngen.core.progress import Progress
from kerngen.errors import ParamError
from kerngen.families import from_mapping, load
from kerngen.families.ntt.cost import largest_fitting_q, prime_up_to, worst_layer_fits
from kerngen.families.ntt.design import design
from kerngen.families.ntt.montgomery import Montgomery
from kerngen.families.ntt.reducers import barrett_reducer
from kerngen.passes.lemmas import LemmaError, ScalarIdiom, prove

from conftest import REPO

# of the process's CPU: the machine's other work does not count, though it slows the process's own (the
# z3 proofs of 2^64 - 2^40 + 1's special-form templates take 2.0-2.2 s on an idle core, 3.3 s beside the suite)
VALIDATION_SECONDS = 5

# the sets of STARK provers and lattice libraries at the lanes' edges: each answers, valid or refused, promptly
NEW_USERS_SETS = [
    (8, 2137038161, 32, ["avx2", "sse"]),
    (32, 2020396321, 32, ["avx2"]),
    (8, 2013265921, 32, ["avx2"]),
    (256, 2013265921, 32, ["avx2", "sse"]),  # BabyBear
    (256, 2130706433, 32, ["avx2", "sse"]),  # KoalaBear
    (256, 2 ** 31 - 2 ** 19 + 1, 32, ["avx2", "sse"]),
    (256, 2 ** 64 - 2 ** 32 + 1, 64, ["avx2", "scalar"]),  # Goldilocks
    (256, 2 ** 64 - 2 ** 40 + 1, 64, ["avx2", "scalar"]),
]


def ntt_table(n: int, q: int, width: int = 16, isa: list[str] | None = None) -> dict:
    return {"name": "x", "family": "ntt", "n": n, "q": q, "width": width, "isa": isa or ["avx2"]}


def test_check_prints_what_a_shipped_set_was_designed_to(kerngen_cli):
    r = kerngen_cli("check", "kyber-3329", "params/gf2m-233.toml", "--isa", "sse")
    assert r.returncode == 0, r.stderr
    kyber, gf2m = r.stdout.splitlines()
    p = load(REPO / "params/kyber-3329.toml", Overrides(isa="sse"))
    ar = design(p, p.target)
    assert kyber.startswith("params/kyber-3329.toml: ok: kyber-3329: ") and f"{p.layers} layers" in kyber
    assert kyber.endswith(f"; sse: {ar.mul.name} multiplication, {ar.reducer.kind} reduction")  # --isa's ISA alone
    assert gf2m.startswith("params/gf2m-233.toml: ok: gf2m-233: GF(2^233)")


def test_check_names_each_refusal_and_fails(tmp_path, kerngen_cli):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nfamily = "ntt"\nn = 256\nq = 3331\n')  # 3331 - 1 = 2 * 3^2 * 5 * 37: no roots
    r = kerngen_cli("check", bad, "tiny-257", tmp_path / "absent.toml")
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and "Traceback" not in r.stderr
    assert lines[0].startswith(f"{bad}: error: q: q-1 = 3330 must be divisible by")
    assert lines[1].startswith("params/tiny-257.toml: ok: tiny-257: ")
    assert lines[2] == f"{tmp_path / 'absent.toml'}: error: no such file"


@pytest.mark.parametrize("n, q, width, isa", NEW_USERS_SETS)
def test_validation_answers_promptly(n, q, width, isa):
    """Valid or refused with a ParamError (never another exception), within VALIDATION_SECONDS of CPU."""
    started = time.process_time()
    try:
        from_mapping(ntt_table(n, q, width, isa), f"q{q}.toml")
    except ParamError as e:
        assert e.source == f"q{q}.toml" and e.rule, e
    took = time.process_time() - started
    assert took < VALIDATION_SECONDS, f"n = {n}, q = {q}: {took:.1f} s"


def test_the_largest_fitting_q_is_what_trying_every_q_finds():
    """16-bit lanes: the bisection's q against every q below 2^15 tried in
    turn, and the prime it names against the primes below it."""
    q, n = 32257, 16
    mul, excess = Montgomery(q, 16), barrett_reducer(q, 16).out_abs - (q - 1) // 2
    tried = [c for c in range(3, q) if worst_layer_fits(mul, c, excess)]
    top = largest_fitting_q(mul, q, excess)
    assert top == max(tried) and tried == list(range(3, top + 1))  # it fits up to a q and not above
    prime = prime_up_to(top, 32, 3)
    assert prime == max(c for c in range(1, top + 1, 32) if sympy.isprime(c))
    with pytest.raises(ParamError, match=rf"q = {prime} works here, the largest prime with 2\^5 \| q - 1 up to {top}"):
        from_mapping(ntt_table(n, q), "x")


def test_every_prime_the_worst_case_admits_validates():
    """The worst case is sound: the primes with the roots of n = 16 just
    below the largest q it admits pass the full analysis, whatever their
    roots of unity; the q asked does not."""
    top = largest_fitting_q(Montgomery(32257, 16), 32257, 0)
    primes = [c for c in range(top // 32 * 32 + 1, top - 1500, -32) if sympy.isprime(c)]
    assert len(primes) >= 5
    for c in primes:
        from_mapping(ntt_table(16, c), "x")
    with pytest.raises(ParamError, match="too large"):
        from_mapping(ntt_table(16, 32257), "x")


def test_a_quotient_whose_subtraction_wraps_is_refused():
    """x - q*(x >> 2) on 32-bit lanes leaves the lane: the runs of the quotient find an input."""
    with pytest.raises(LemmaError, match="not congruent"):
        prove(ScalarIdiom("barrett", 12289, (("sra", "t", "x", 2), ("mullo", "u", "t", 12289),
                                             ("sub", "r", "x", "u")), 32))


def test_a_long_step_reports_its_progress(caplog):
    log = logging.getLogger("kerngen.progress.test")
    with caplog.at_level(logging.INFO, logger=log.name):
        with Progress("x: validating", after=0.05, log=log) as progress:
            progress.note("proving")
            time.sleep(0.3)
        said = len(caplog.records)
        time.sleep(0.15)
    assert said >= 2 and len(caplog.records) == said  # reported while it ran, silent after
    assert re.fullmatch(r"x: validating: proving \(\d+ s so far\)", caplog.records[0].getMessage())
