"""Each figure kind renders from the hand-made fixtures with the expected number of marks."""
from __future__ import annotations

import pytest

from bundle_kit import rankstats
from site_src.figures import FigureError, render_figure

from figtest_helpers import FIXTURES, count_marks, payload, svgs

DATA = {"attribution": "attribution_per_pair.jsonl", "patching": "patching_per_pair.jsonl"}


def ranked_components(dimension, mode="mean"):
    joined = rankstats.join_rows(rankstats.read_jsonl(FIXTURES / DATA["attribution"]),
                                 rankstats.read_jsonl(FIXTURES / DATA["patching"]), mode)
    return rankstats.rankings(rankstats.component_scores(joined)[dimension])


def test_rank_scatter_draws_one_dot_per_ranked_component(ctx):
    fig = render_figure("rank_scatter", {"id": "rs", "data": DATA, "options": {"dimension": "safety"}}, ctx)
    expected = len(ranked_components("safety"))  # embed is attributed but never patched
    assert expected == 8
    assert fig.marks == expected
    for theme, svg in svgs(fig.body_html).items():
        assert count_marks(svg, "dots") == expected, theme
    assert 'data-figure-kind="rank_scatter"' in fig.body_html
    assert '<select id="fig-rs-dimension" data-figure-signal="dimension">' in fig.body_html
    # The interactive view filters on the `dimension` signal and holds both dimensions' rows.
    spec = payload(fig.body_html)
    light = spec["specs"]["light"]
    assert {s["name"]: s.get("value") for s in light["signals"]}["dimension"] == "safety"
    values = [row for rows in spec["data"].values() for row in rows if "patch_rank" in row]
    assert len(values) == 16


def test_rank_scatter_ranks_come_from_rankstats(ctx):
    fig = render_figure("rank_scatter", {"id": "rs", "data": DATA}, ctx)
    ranks = ranked_components("helpfulness")
    rows = [row for rows in payload(fig.body_html)["data"].values() for row in rows if "patch_rank" in row]
    got = {r["component"]: (r["attribution_rank"], r["patch_rank"]) for r in rows if r["dimension"] == "helpfulness"}
    assert got == ranks


def test_rho_bars_one_bar_per_series_entry_with_sources(ctx):
    spec = {"id": "rb", "data": {"series": [
        {"label": "this study", "ref": "golden.json#per_dimension_rho"},
        {"label": "published elsewhere", "ref": "quoted.json#per_dimension_rho"}]}}
    fig = render_figure("rho_bars", spec, ctx)
    assert fig.marks == 2 + 3
    for svg in svgs(fig.body_html).values():
        assert count_marks(svg, "bars") == 5
    assert [s.expression for s in fig.sources] == ["golden.json#per_dimension_rho", "quoted.json#per_dimension_rho"]
    assert "published elsewhere" in fig.body_html


def test_rho_bars_rejects_a_scalar_reference(ctx):
    spec = {"id": "rb", "data": {"series": [{"label": "x", "ref": "golden.json#mean_rho"}]}}
    with pytest.raises(FigureError, match=r"golden.json:5\) is not a"):
        render_figure("rho_bars", spec, ctx)


def test_unknown_kind_names_the_known_ones(ctx):
    with pytest.raises(FigureError, match="unknown figure kind 'pie'.*rank_scatter"):
        render_figure("pie", {"id": "x"}, ctx)
