"""Each figure kind renders from the hand-made fixtures with the expected number of marks."""
from __future__ import annotations

import pytest

from bundle_kit import localize, rankstats
from site_src.figures import FigureError, render_figure

from figtest_helpers import FIXTURES, SPECS, count_marks, inlined, panel_svgs, payload, svgs

DATA = {"attribution": "attribution_per_pair.jsonl", "patching": "patching_per_pair.jsonl"}


def ranked_components(dimension, mode="mean", patch_score="ratio_of_means"):
    """The rankings a ranking figure draws by default: the one patch score (docs/statistics.md)."""
    joined = rankstats.join_rows(rankstats.read_jsonl(FIXTURES / DATA["attribution"]),
                                 rankstats.read_jsonl(FIXTURES / DATA["patching"]), mode)
    return rankstats.rankings(rankstats.component_scores(joined, patch_score)[dimension])


def test_rank_scatter_draws_one_dot_per_ranked_component(ctx):
    fig = render_figure("rank_scatter", {"id": "rs", "data": DATA, "options": {"dimension": "safety"}}, ctx)
    expected = len(ranked_components("safety"))  # embed is attributed but never patched
    assert expected == 8
    assert fig.marks == expected
    for theme, svg in svgs(inlined(fig)).items():
        assert count_marks(svg, "dots") == expected, theme
    assert 'data-figure-kind="rank_scatter"' in inlined(fig)
    assert '<select id="fig-rs-dimension" data-figure-signal="dimension">' in inlined(fig)
    # The interactive view filters on the `dimension` signal and holds both dimensions' rows.
    spec = payload(fig)
    light = spec["specs"]["light"]
    assert {s["name"]: s.get("value") for s in light["signals"]}["dimension"] == "safety"
    values = [row for rows in spec["data"].values() for row in rows if "patch_rank" in row]
    assert len(values) == 16


def test_rank_scatter_ranks_come_from_rankstats(ctx):
    fig = render_figure("rank_scatter", {"id": "rs", "data": DATA}, ctx)
    ranks = ranked_components("helpfulness")
    rows = [row for rows in payload(fig)["data"].values() for row in rows if "patch_rank" in row]
    got = {r["component"]: (r["attribution_rank"], r["patch_rank"]) for r in rows if r["dimension"] == "helpfulness"}
    assert got == ranks


def test_rho_bars_one_bar_per_series_entry_with_sources(ctx):
    spec = {"id": "rb", "data": {"series": [
        {"label": "this study", "ref": "golden.json#per_dimension_rho"},
        {"label": "published elsewhere", "ref": "quoted.json#per_dimension_rho"}]}}
    fig = render_figure("rho_bars", spec, ctx)
    assert fig.marks == 2 + 3
    # one panel per series, each its own drawing, so that the page can wrap them to its column
    panels = panel_svgs(inlined(fig))
    assert [count_marks(svg, "bars") for svg in panels] == [2, 3]
    assert inlined(fig).count('class="fig-panel"') == 2 and "fig-live" not in inlined(fig)
    assert [s.expression for s in fig.sources] == ["golden.json#per_dimension_rho", "quoted.json#per_dimension_rho"]
    assert "published elsewhere" in inlined(fig)


def test_rho_bars_draw_the_intervals_they_are_given(ctx, tmp_path):
    spec = {"id": "rb", "data": {"series": [
        {"label": "this study", "ref": "golden.json#per_dimension_rho", "ci": "golden.json#per_dimension_rho_ci"},
        {"label": "published elsewhere", "ref": "quoted.json#per_dimension_rho"}]}}
    fig = render_figure("rho_bars", spec, ctx)
    with_ci, without = panel_svgs(inlined(fig))
    assert count_marks(with_ci, "intervals") == 2 and count_marks(without, "intervals") == 0
    assert "its 95% interval" in inlined(fig) and "no interval given" in inlined(fig)
    assert fig.sources[1].expression == "golden.json#per_dimension_rho_ci"
    bad = {"id": "rb", "data": {"series": [{"label": "x", "ref": "golden.json#per_dimension_rho",
                                            "ci": "golden.json#per_dimension_rho"}]}}
    with pytest.raises(FigureError, match="has no \\[low, high\\] interval"):
        render_figure("rho_bars", bad, ctx)


def test_rho_bars_rejects_a_scalar_reference(ctx):
    spec = {"id": "rb", "data": {"series": [{"label": "x", "ref": "golden.json#mean_rho"}]}}
    with pytest.raises(FigureError, match=r"golden.json:5\) is not a"):
        render_figure("rho_bars", spec, ctx)


def test_unknown_kind_names_the_known_ones(ctx):
    with pytest.raises(FigureError, match="unknown figure kind 'pie'.*rank_scatter"):
        render_figure("pie", {"id": "x"}, ctx)


def test_patch_picker_two_points_per_pair_and_a_labelled_select(ctx):
    fig = render_figure("patch_picker", {"id": "pp", "data": DATA, "options": {"dimension": "safety"}}, ctx)
    assert fig.marks == 2 * 3  # three pairs, clean and patched each
    for svg in svgs(inlined(fig)).values():
        assert count_marks(svg, "points") == 6
    # the picker names what it shows: the dimension and the mode beside the component, and the
    # dimension is a second select (issue 27 item 5: a picker fixed to one dimension hid the others)
    assert '<label for="fig-pp-component">Component to patch (mean patching)</label>' in inlined(fig)
    assert '<label for="fig-pp-dimension">Dimension</label>' in inlined(fig)
    assert '<option value="safety" selected>' in inlined(fig)
    assert 'component + \\" patched (mean), dimension \\" + dimension' in fig.files[next(iter(k for k in fig.files if k.endswith(".json")))].decode()
    assert inlined(fig).count("<option ") == 8 + 2
    # Default = the component patching moves most (patch rank 1), chosen through rankstats.
    top = min(ranked_components("safety").items(), key=lambda kv: kv[1][1])[0]
    assert f'<option value="{top}" selected>' in inlined(fig)
    spec = payload(fig)
    rows = [row for rows in spec["data"].values() for row in rows if "patched_margin" in row]
    assert len(rows) == 8 * 3 * 2 and {r["component"] for r in rows} == set(ranked_components("safety"))
    assert {r["dimension"] for r in rows} == {"helpfulness", "safety"}


def test_patch_picker_keeps_the_axis_fixed_across_components(ctx):
    a = render_figure("patch_picker", {"id": "pp", "data": DATA, "options": {"component": "attn_L0"}}, ctx)
    b = render_figure("patch_picker", {"id": "pp", "data": DATA, "options": {"component": "mlp_L3"}}, ctx)
    domain = lambda fig: [s["domain"] for s in payload(fig)["specs"]["light"]["scales"] if s["name"] == "y"]
    assert domain(a) == domain(b) and isinstance(domain(a)[0], list)


def test_top_lists_entries_with_receipts_and_ranks_beyond(ctx):
    fig = render_figure("top_lists", {"id": "tl", "data": DATA, "options": {"n": 3, "dimension": "helpfulness"}}, ctx)
    assert fig.marks == 6
    assert inlined(fig).count("<li>") == 6
    assert "<svg" not in inlined(fig)
    ranks = ranked_components("helpfulness")
    first_attr = min(ranks, key=lambda c: ranks[c][0])
    assert (f'<span class="fig-component">{first_attr}</span>: attribution rank '
            f'<a class="receipt"') in inlined(fig)
    assert len(fig.sources) == 6 * 4  # attribution rank, patch rank, moves %, pairs flagged
    patch_ranks = [s for s in fig.sources if s.expression.startswith(f"patch rank of {first_attr}:")]
    assert patch_ranks[0].value == ranks[first_attr][1]
    assert patch_ranks[0].source.endswith("patching_per_pair.jsonl") and patch_ranks[0].line is None
    assert "Ranked beyond this list" in inlined(fig)
    # issue 27 item 4: no false precision in what a reader sees ("moves 99.8641%")
    import re
    assert re.search(r">\d+\.\d%<", inlined(fig)) and not re.search(r"\d\.\d{2,}%", inlined(fig))


def _fixture_patching(dimension, mode="mean"):
    return [r for r in rankstats.read_jsonl(FIXTURES / DATA["patching"])
            if r["dimension"] == dimension and r["mode"] == mode]


def test_patch_picker_shows_the_off_distribution_flag_of_every_patch(ctx):
    fig = render_figure("patch_picker", {"id": "pp", "data": DATA,
                                         "options": {"dimension": "safety", "component": "mlp_L3"}}, ctx)
    rows = _fixture_patching("safety")
    every = rows + _fixture_patching("helpfulness")   # the data table holds every dimension
    csv = next(v for k, v in fig.files.items() if k.endswith(".csv")).decode().splitlines()
    assert csv[0].endswith(",off-distribution")
    assert sum(line.endswith(",flagged") for line in csv) == sum(r["offdist_flag"] for r in every) > 0
    assert sum(line.endswith(",no") for line in csv) == sum(not r["offdist_flag"] for r in every) > 0
    picked = sum(r["offdist_flag"] for r in rows if r["component"] == "mlp_L3")
    assert f"{picked} of the 3 patched margins are flagged off-distribution" in inlined(fig)
    spec = payload(fig)
    data = [row for rows_ in spec["data"].values() for row in rows_ if "patched_margin" in row]
    assert {row["offdist"] for row in data} == {"flagged", "no"}
    shapes = [s for s in spec["specs"]["light"]["scales"] if s["name"] == "shape"]
    assert shapes[0]["range"][shapes[0]["domain"].index("patched, off-distribution")] == "cross"


def test_top_lists_count_flagged_pairs_with_receipts(ctx):
    fig = render_figure("top_lists", {"id": "tl", "data": DATA, "options": {"n": 3, "dimension": "helpfulness"}}, ctx)
    rows = _fixture_patching("helpfulness")
    counted = [s for s in fig.sources if s.expression.startswith("pairs whose ")]
    assert len(counted) == 6
    for source in counted:
        component = source.expression[len("pairs whose "):].split(" ")[0]
        assert source.value == sum(r["offdist_flag"] for r in rows if r["component"] == component)
    assert inlined(fig).count(" of 3 pairs</li>") == 6


def test_rows_without_a_flag_are_not_scored():
    from site_src.figures.data import offdist_counts, offdist_label
    assert offdist_label({"offdist_z": 2.0}) == "not scored"
    assert offdist_label({"offdist_flag": False}) == "no"
    rows = [{"mode": "mean", "dimension": "d", "component": "c", "offdist_flag": True},
            {"mode": "mean", "dimension": "d", "component": "c"},
            {"mode": "zero", "dimension": "d", "component": "c", "offdist_flag": True}]
    assert offdist_counts(rows, "mean", "d") == {"c": (1, 1)}


def test_lens_curve_marks_crystallization_per_dimension(ctx):
    fig = render_figure("lens_curve", {"id": "lc", "data": {"lens": "lens_per_pair.jsonl"}}, ctx)
    assert fig.marks == 2
    # one dimension drawn and labelled at a time, the others as grey context; a select picks it
    for svg in svgs(inlined(fig)).values():
        assert count_marks(svg, "lines") == 1 and count_marks(svg, "context") == 1
        assert count_marks(svg, "crystal") == 1
    assert '<select id="fig-lc-dimension" data-figure-signal="dimension">' in inlined(fig)
    rows = rankstats.read_jsonl(FIXTURES / "lens_per_pair.jsonl")
    curve = [rankstats.mean(r["running_margin"] for r in rows if r["dimension"] == "safety" and r["layer"] == layer)
             for layer in range(4)]
    safety = [s for s in fig.sources if "of safety" in s.expression][0]
    assert safety.value == rankstats.crystallization_depth(curve)


def test_lens_curve_draws_the_dimension_it_is_given(ctx):
    fig = render_figure("lens_curve", {"id": "lc", "data": {"lens": "lens_per_pair.jsonl"},
                                       "options": {"dimension": "safety"}}, ctx)
    assert fig.marks == 2 and len(fig.sources) == 2
    assert '<option value="safety" selected>' in inlined(fig)
    with pytest.raises(FigureError, match="dimension 'nope' not in the data"):
        render_figure("lens_curve", {"id": "lc", "data": {"lens": "lens_per_pair.jsonl"}, "options": {"dimension": "nope"}}, ctx)


def test_margin_distribution_one_tick_per_pair(ctx):
    fig = render_figure("margin_distribution", {"id": "md", "data": {"pairs": "attribution_per_pair.jsonl"}}, ctx)
    assert fig.marks == 6  # 2 dimensions x 3 pairs, though every pair has 9 component rows
    for svg in svgs(inlined(fig)).values():
        assert count_marks(svg, "ticks") == 6


def test_heatmap_one_cell_per_matrix_entry(ctx):
    fig = render_figure("heatmap", {"id": "hm", "data": {"matrix": "cosines.json#cosines"}}, ctx)
    assert fig.marks == 9
    for svg in svgs(inlined(fig)).values():
        assert count_marks(svg, "cells") == 9
    assert fig.sources[0].expression == "cosines.json#cosines"


def test_bad_fixture_line_is_named(ctx, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"dimension": "a", "pair_id": 1, "margin": 1}\n{"dimension": "a", "pair_id": 2}\n')
    import dataclasses
    ctx = dataclasses.replace(ctx, resolve_path=lambda name: bad)
    with pytest.raises(FigureError, match=r"bad.jsonl:2: row lacks field 'margin'"):
        render_figure("margin_distribution", {"id": "md", "data": {"pairs": "bad.jsonl"}}, ctx)


def test_ranking_figures_take_the_study_patch_score(ctx):
    """By default a ranking figure ranks by the one patch score, sum |effect| / sum |clean margin|
    (docs/statistics.md); `options: {patch_score: mean_ratio}` draws the sensitivity check, the
    mean of per-pair ratios; anything else is refused."""
    def drawn(options):
        fig = render_figure("rank_scatter", {"id": "rs", "data": DATA, "options": options}, ctx)
        rows = [row for rows in payload(fig)["data"].values() for row in rows if "patch_rank" in row]
        return {r["component"]: (r["attribution_rank"], r["patch_rank"]) for r in rows if r["dimension"] == "helpfulness"}
    assert drawn({}) == drawn({"patch_score": "ratio_of_means"}) == ranked_components("helpfulness")
    sensitivity = drawn({"patch_score": "mean_ratio"})
    assert sensitivity == ranked_components("helpfulness", patch_score="mean_ratio")
    assert sensitivity != ranked_components("helpfulness")   # the fixture tells them apart
    with pytest.raises(FigureError, match="patch_score"):
        render_figure("top_lists", {"id": "tl", "data": DATA, "options": {"patch_score": "median"}}, ctx)


def test_removal_curve_draws_the_chosen_objective_with_its_null_band_and_smallest_set(ctx):
    spec = dict(SPECS)["removal_curve"]
    fig = render_figure("removal_curve", spec, ctx)
    assert fig.marks == 6   # 2 objectives x 3 sets
    for svg in svgs(inlined(fig)).values():
        assert count_marks(svg, "removed") == 1 and count_marks(svg, "moved") == 1
        assert count_marks(svg, "null") == 3   # a range bar per set
        assert count_marks(svg, "k80") == 1   # helpfulness reaches 0.8 at k = 2
    assert '<select id="fig-j-dimension" data-figure-signal="dimension">' in inlined(fig)
    # the band is localize.band over the directions' moved shares, one implementation
    sums = {r["direction"]: r["abs_margin"] for r in rankstats.read_jsonl(FIXTURES / "null_directions.jsonl")
            if r["dimension"] == "helpfulness"}
    moved = [localize.patch_score(r["curve"][0], sums[r["direction"]])
             for r in rankstats.read_jsonl(FIXTURES / "null_curve.jsonl") if r["dimension"] == "helpfulness"]
    low, high = localize.band(moved)
    csv = next(v for k, v in fig.files.items() if k.endswith(".csv")).decode().splitlines()
    assert csv[1].split(",") == ["helpfulness", "1", "mlp_L1", "+0.450000", "+0.500000", f"{low:+.6f}", f"{high:+.6f}"]
    # safety never reaches the target: no diamond when it is drawn
    safety = render_figure("removal_curve", {**spec, "options": {"dimension": "safety"}}, ctx)
    for svg in svgs(inlined(safety)).values():
        assert count_marks(svg, "k80") == 0


def test_removal_curve_refuses_a_summary_without_its_curves(ctx):
    spec = dict(SPECS)["removal_curve"]
    with pytest.raises(FigureError, match=r"removal.json:\d+ is not an \{objective"):
        render_figure("removal_curve", {**spec, "data": {**spec["data"], "where": "removal.json#target"}}, ctx)
    with pytest.raises(FigureError, match="order lacks order, curve and moved_curve"):
        render_figure("removal_curve", {**spec, "data": {**spec["data"], "where": "removal.json#where/helpfulness"}}, ctx)
