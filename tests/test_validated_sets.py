"""Sets that validated and then did not build, explicit choices, and emitting
over a directory: each fix with a cheap set (small n)."""

import contextlib
import io
import json

import pytest

from kerngen.cli import main
from kerngen.errors import ParamError, VerifyError
from kerngen.core.params import Overrides
from kerngen.families import build_all, from_mapping, load
from kerngen.families.ntt import kernels
from kerngen.families.ntt.build import build
from kerngen.families.ntt.design import design
from kerngen.families.ntt.layout import plan
from kerngen.families.ntt.montgomery import odd_down
from kerngen.machine.target import make_target

from conftest import REPO
from test_property_sets import assert_refused, run_cli, toml

NTT = {"name": "v", "family": "ntt"}


def ntt(**keys):
    return from_mapping({**NTT, **keys}, "v.toml")


def kinds(bundle) -> set[str]:
    return {f.kind for f in bundle.functions}


def test_a_lane_move_into_an_xmm_write_is_followed_by_the_lanes_it_wrote():
    """n = 8 on 32-bit lanes: vectors of 4 lanes in xmm registers, odd lanes
    moved down straight from 16 bytes of memory (`vmovshdup xmm, [mem]`);
    the verifier followed the move over all 8 lanes of its model and failed
    with an IndexError. Now it follows the 4 the instruction wrote."""
    p = ntt(n=8, q=8380417, width=32, isa="avx2")
    [bundle] = build_all(p)
    basemul = bundle.function("basemul")
    assert any(ins.op == "vmovshdup" and getattr(ins.operands[1], "size", 0) == 16 for ins in basemul.kernel.body)
    assert {"ntt_forward", "basemul", "ntt_inverse", "freeze"} <= kinds(bundle)


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("order", ["standard", "natural"])
def test_adjacent_block_coefficients_are_split_where_no_pair_product_exists(bits, order):
    """Blocks of degree 2 in the standard and natural orders keep their two
    coefficients side by side; only 16-bit lanes have the pair base
    multiplication (`vpmaddwd`). Wider lanes get base multiplication's
    swaps, which leave each register with coefficient k of its blocks."""
    layout = plan(64, 5, make_target("avx2", bits), order)
    assert layout.pairs_in_lanes and not layout.pair_basemul and layout.block_steps
    assert plan(64, 5, make_target("avx2", 16), order).pair_basemul


@pytest.mark.parametrize("keys", [
    dict(n=64, q=548076289, width=32, isa="sse", mul="shoup", order="standard", layers=5),
    dict(n=16, q=79249460751830849, width=64, isa="avx2", order="natural", layers=3),
], ids=["32-bit-standard", "64-bit-natural"])
def test_blocks_of_degree_two_in_the_standard_and_natural_orders_build(keys):
    assert "basemul" in kinds(build(ntt(**keys)))


def test_a_karatsuba_cross_term_of_two_variables_takes_their_factors_in_either_order(monkeypatch):
    """On 32-bit lanes a product of two variables (lo(lo(x*w)*q^-1)) names
    its factors in no particular order: the cross term check takes either,
    so blocks of degree 2 build there. A cross term of other factors, here
    (a0 + b1)(b0 + a1), is still refused (its map is no longer a*b)."""
    keys = dict(n=16, q=8380417, width=32, isa="avx2", layers=3)
    bundle = build(ntt(**keys))
    assert "karatsuba" in dict(bundle.function("basemul").facts)
    original = kernels._karatsuba_terms

    def crossed(b, mul, a, y, *rest):
        return original(b, mul, [a[0], y[1]], [y[0], a[1]], *rest)

    monkeypatch.setattr(kernels, "_karatsuba_terms", crossed)
    with pytest.raises(VerifyError, match="map"):
        build(ntt(name="crossed", **keys))


def test_a_one_lane_vector_pairs_its_padding_with_zeros():
    """n = 2 on 32-bit lanes: each vector one lane of an xmm register. The
    odd neighbour of its only lane is the table's zero padding, so the
    products of the odd lanes pair w = 0 with w' = 0 (they paired 0 with
    lane 0's w', which the verifier refused); broadcast constants stay whole."""
    assert odd_down([7]) == [0] and odd_down([1, 2, 3, 4]) == [2, 2, 4, 4]
    for mul in ("montgomery", "shoup"):
        assert "ntt_inverse" in kinds(build(ntt(n=2, q=8380417, width=32, mul=mul)))


def test_a_named_reducer_keeps_montgomerys_multiplication():
    """q = 12289: auto takes Shoup's (whose lanes only Harvey's reductions
    reduce); a named reducer is honoured with Montgomery's, or refused."""
    assert design(ntt(n=16, q=12289)).mul.name == "shoup"
    ar = design(ntt(n=16, q=12289, reducer="barrett"))
    assert (ar.mul.name, ar.reducer.kind) == ("montgomery", "barrett")
    with pytest.raises(ParamError, match="no special form") as e:
        ntt(n=16, q=12289, reducer="special")
    assert e.value.key == "reducer"
    with pytest.raises(ParamError, match="64-bit lanes are unsigned") as e:
        ntt(n=16, q=79249460751830849, width=64, reducer="barrett")
    assert e.value.key == "reducer"


@pytest.mark.parametrize("option, value", [("order", "natural"), ("policy", "eager"), ("reducer", "barrett")])
def test_ntt_options_are_refused_for_a_gf2m_set(option, value):
    path = REPO / "params/gf2m-163.toml"
    with pytest.raises(ParamError, match="option of the ntt family") as e:
        load(path, Overrides.of(**{option: value}))
    assert e.value.key == f"--{option}"
    assert load(path, Overrides(isa="sse")).isas == ("sse",)  # common options stay


def test_a_name_is_at_most_100_characters(tmp_path):
    path = tmp_path / "long.toml"
    path.write_text(toml({**NTT, "name": "a" * 300, "n": 2, "q": 5}))
    line = assert_refused(*run_cli("emit", str(path), "--out", str(tmp_path / "o")), tmp_path / "o")
    assert "name: must be 1 to 100" in line and "(300 characters)" in line
    path.write_text(toml({**NTT, "name": "a" * 100, "n": 2, "q": 5}))
    assert run_cli("emit", str(path), "--out", str(tmp_path / "o"))[0] == 0
    assert (tmp_path / "o" / ("a" * 100 + ".asm")).is_file()


def _emit(tmp_path, name: str, out, *flags: str) -> tuple[int, str]:
    path = tmp_path / f"{name}.toml"
    path.write_text(toml({**NTT, "name": name, "n": 4, "q": 17}))
    return run_cli("emit", str(path), "--out", str(out), *flags)


def test_emit_replaces_its_own_bundle_and_refuses_anything_else_without_force(tmp_path):
    out = tmp_path / "b"
    assert _emit(tmp_path, "first", out)[0] == 0
    assert _emit(tmp_path, "first", out)[0] == 0  # the same set's bundle: replaced whole
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, err = _emit(tmp_path, "second", out)
    assert code == 2 and "the bundle of 'first', not of 'second'" in err and "--force" in err, err
    (out / "NOTES.txt").write_text("mine")
    code, err = _emit(tmp_path, "first", out)
    assert code == 2 and "does not list (NOTES.txt)" in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {**before, "NOTES.txt": b"mine"}  # nothing touched
    assert _emit(tmp_path, "second", out, "--force")[0] == 0
    assert json.loads((out / "manifest.json").read_text())["params"]["name"] == "second"
    assert not (out / "NOTES.txt").exists() and not (out / "first.asm").exists()


def test_emit_help_names_force():
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        main(["emit", "--help"])
    assert "--force" in text.getvalue() and "another set's bundle" in text.getvalue()
