"""`kerngen explore`: rows for every (policy, reduction), the heatmap, refusals."""

import json
from pathlib import Path

import pytest

from kerngen import cli
from kerngen.core.params import Overrides
from kerngen.families import load
from kerngen.families.ntt import explore as explore_mod
from kerngen.families.ntt.build import build, schedules
from kerngen.families.ntt.explore import _register_members, format_table, panel_data
from kerngen.families.ntt.params import POLICIES

INT16_MAX = 32767

from conftest import REPO, kerngen

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXPLORED_N = 64

@pytest.fixture(scope="module")
def kyber_r1(tmp_path_factory, once_per_run):
    """One JSON run on kyber-r1-7681's q and reducer at n = 64 (few batches: the ticks only need to exist
    here; the shipped n = 256 builds four times the code for the same rows), 12 bundles built and timed:
    made once in a run, whichever workers take this module's tests."""
    def run():
        where = tmp_path_factory.mktemp("explore")
        params = where / "kyber-r1-64.toml"
        params.write_text((REPO / "params/kyber-r1-7681.toml").read_text().replace("n = 256", f"n = {EXPLORED_N}"))
        png = where / "sub" / "kyber.png"
        r = kerngen("explore", str(params), "--json", "--batches", "3", "--png", str(png))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout), str(png), r.stderr, str(params)
    rows, png, stderr, params = once_per_run("explore-kyber-r1", run)
    return rows, Path(png), stderr, Path(params)


def test_rows_cover_every_policy_and_both_reductions(kyber_r1):
    """Montgomery with Barrett and the special form, and Shoup (7681 < 2^14) with Harvey's reductions."""
    rows, _, _, _ = kyber_r1
    assert {(r["mul"], r["policy"], r["reduction"]) for r in rows} == \
        {("montgomery", p, k) for p in POLICIES for k in ("barrett", "special")} | \
        {("shoup", p, "harvey") for p in POLICIES}
    for r in rows:
        for key in ("mul", "policy", "reduction", "reductions", "instructions", "ticks", "max_bound",
                    "multiplications", "mca_rthroughput"):
            assert key in r, key
        assert r["reductions"] == r["reductions_forward"] + r["reductions_inverse"]
        assert r["ticks"] > 0 and r["instructions"] > 0
        assert len(r["max_bound"]["forward"]) == len(r["max_bound"]["inverse"]) == 6  # 7681: 6 layers at n = 64


def test_index_never_beats_layer_and_bounds_stay_in_int16(kyber_r1):
    rows, _, _, _ = kyber_r1
    by = {(r["mul"], r["policy"], r["reduction"]): r for r in rows}
    for mul, kind in (("montgomery", "barrett"), ("montgomery", "special"), ("shoup", "harvey")):
        for d in ("forward", "inverse"):
            assert by[mul, "index", kind][f"reductions_{d}"] <= by[mul, "layer", kind][f"reductions_{d}"]
            if "minimal" in POLICIES:
                assert by[mul, "minimal", kind][f"reductions_{d}"] <= by[mul, "index", kind][f"reductions_{d}"]
    for r in rows:  # |value| in int16, or value in uint16
        top = INT16_MAX if r["mul"] == "montgomery" else 2 * INT16_MAX + 1
        assert all(b <= top for d in ("forward", "inverse") for b in r["max_bound"][d])


def test_png_is_written(kyber_r1):
    _, png, stderr, _ = kyber_r1
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert str(png) in stderr


def test_png_goes_to_the_working_directory_by_default(monkeypatch, tmp_path):
    seen = {}

    def fake(p, batches, png, say, tester=None, seed=1):
        seen["png"] = png
        return [], []

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(explore_mod.EXPLORER, "explore", fake)
    monkeypatch.setattr(explore_mod.EXPLORER, "format_table", lambda rows: "")
    assert cli.main(["explore", str(REPO / "params" / "tiny-257.toml")]) == 0
    assert seen["png"] == Path("explore-tiny-257.png")


def test_table_names_every_row(kyber_r1):
    rows, _, _, _ = kyber_r1
    text = format_table(rows)
    for r in rows:
        assert f"{r['reductions_forward']}+{r['reductions_inverse']}" in text
    assert "special" in text and "harvey" in text and "worst |value| (montgomery) or value (shoup)" in text
    assert text.splitlines()[1].split()[:4] == ["mul", "policy", "reduction", "reductions"]


def test_heatmap_marks_exactly_the_reduced_registers():
    """Every reduction the schedule counts is one outlined register (16 cells) in the heatmap data."""
    for policy in POLICIES:
        for reducer in ("barrett", "special"):
            bundle = build(load(REPO / "params" / "tiny-257.toml", Overrides.of(policy=policy, reducer=reducer)))
            members = _register_members(bundle.design.layout)
            for d, s in schedules(bundle).items():
                bounds, reduced, labels = panel_data(s, members, bundle.params.n)
                assert len(bounds) == len(labels) == len(s.per_index) + 1
                assert sum(map(sum, reduced)) == 16 * s.count


def test_gf2m_is_refused(tmp_path, kerngen_cli):
    r = kerngen_cli("explore", str(REPO / "params" / "gf2m-163.toml"), "--png", str(tmp_path / "x.png"))
    assert r.returncode == 2
    assert "family" in r.stderr and "ntt" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_explore_runs_on_the_isa_named(tmp_path, kerngen_cli):
    """--isa sse explores the SSE kernels (8 lanes: more instructions than the
    AVX2 default on the same schedules); one ISA at a time."""
    rows = {}
    for isa in ("sse", None):
        args = ["explore", "params/tiny-257.toml", "--json", "--batches", "3", "--png", str(tmp_path / "t.png")]
        r = kerngen_cli(*args, *(["--isa", isa] if isa else []))
        assert r.returncode == 0, r.stderr
        rows[isa] = json.loads(r.stdout)
    assert {r["isa"] for r in rows["sse"]} == {"sse"} and {r["isa"] for r in rows[None]} == {"avx2"}
    for sse, avx2 in zip(rows["sse"], rows[None]):
        assert (sse["policy"], sse["reduction"], sse["reductions"]) == (avx2["policy"], avx2["reduction"],
                                                                        avx2["reductions"])
        assert sse["instructions"] > avx2["instructions"] and sse["ticks"] > 0
    r = kerngen_cli("explore", "params/tiny-257.toml", "--isa", "avx2,sse")
    assert r.returncode == 2 and "--isa takes one ISA" in r.stderr


def test_the_variant_auto_picks_is_marked_in_rows_and_table(kyber_r1):
    """Exactly one row is the variant `kerngen emit` builds with mul and reducer left at auto."""
    rows, _, _, params = kyber_r1
    picked = [r for r in rows if r["auto"]]
    assert len(picked) == 1
    emitted = build(load(params, Overrides.of(reducer="auto")))
    assert (picked[0]["mul"], picked[0]["policy"], picked[0]["reduction"]) == (
        emitted.params_manifest["mul_used"], emitted.params.policy, emitted.params_manifest["reducer_used"])
    marked = [line for line in format_table(rows).splitlines() if line.endswith(" yes")]
    assert len(marked) == 1 and marked[0].split()[:3] == [picked[0]["mul"], picked[0]["policy"],
                                                          picked[0]["reduction"]]


def test_heatmap_colours_cells_by_their_share_of_their_own_lane_and_frames_autos_pick():
    """A cell's colour value is its bound over 2^15 on Montgomery's signed lanes and over 2^16 on
    Shoup's unsigned ones (tiny-257 has both), on one 0..1 scale; the variant auto builds is framed."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    p = load(REPO / "params" / "tiny-257.toml", Overrides(isa="avx2"))
    variants = explore_mod.build_variants(p, lambda line: None)
    assert {v.mul for v in variants} == {"montgomery", "shoup"}
    picked = explore_mod.auto_label(p)
    fig = explore_mod.heatmap(variants, picked)
    try:
        panels = [ax for ax in fig.axes if ax.images]
        assert len(panels) == 2 * len(variants)
        for k, ax in enumerate(panels):  # row-major: forward panels of every variant, then inverse ones
            v, d = variants[k % len(variants)], ("forward", "inverse")[k // len(variants)]
            s = v.schedules[d]
            limit = 1 << (p.width - 1) if v.mul == "montgomery" else 1 << p.width
            image = ax.images[0]
            assert image.get_clim() == (0, 1)
            assert image.get_array().max() == pytest.approx(max(s.input_bound, *map(max, s.per_index)) / limit)
            framed = {to_hex(spine.get_edgecolor()) for spine in ax.spines.values()} == {explore_mod.AUTO_FRAME}
            assert framed == (v.label == picked), v.label
            assert ("(auto)" in ax.get_title()) == (v.label == picked)
        assert sum(v.label == picked for v in variants) == 1
    finally:
        plt.close(fig)
