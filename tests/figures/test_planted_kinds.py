"""The planted study's figure kinds: key_recovery and spec_curve, from hand-made fixtures
(tests/figures/fixtures/make_planted_fixtures.py)."""
from __future__ import annotations

import json

import pytest

from bundle_kit import rankstats
from site_src.figures import FigureError, render_figure
from site_src.honesty import claims

from figtest_helpers import FIXTURES, count_marks, inlined, svgs


def count_concat_marks(svg, name: str) -> int:
    """Data marks of layer `datamark_<name>` inside a concatenation (Vega-Lite suffixes its name)."""
    total = 0
    for group in svg.iter("g"):
        classes = group.get("class", "").split()
        if "role-mark" in classes and any(c.startswith(f"datamark_{name}") and c.endswith("_marks") for c in classes):
            total += len(list(group))
    return total

RECOVERY = {"id": "kr", "data": {"methods": "key_recovery.json#key_recovery/by_method"}}


def curve(headline):
    return {"id": f"sc-{headline}", "data": {"rows": "spec_curve.jsonl",
                                             "summary": f"key_recovery.json#key_recovery/spec_curve/{headline}"}}


def test_key_recovery_one_point_per_method_and_series(ctx):
    fig = render_figure("key_recovery", RECOVERY, ctx)
    block = json.loads((FIXTURES / "key_recovery.json").read_text())["key_recovery"]["by_method"]
    expected = sum(1 + len(entry["per_family"]) for entry in block.values())
    assert fig.marks == expected == 12
    for svg in svgs(inlined(fig)).values():
        assert count_marks(svg, "points") == expected
    assert "all families" in inlined(fig) and "chance" in inlined(fig)
    assert fig.sources[0].expression.endswith("key_recovery/by_method")


def test_key_recovery_refuses_a_malformed_interval(ctx, tmp_path):
    block = json.loads((FIXTURES / "key_recovery.json").read_text())
    block["key_recovery"]["by_method"]["attribution"]["ci"] = [0.5]
    bad = FIXTURES / "key_recovery_bad.json"
    bad.write_text(json.dumps(block))
    try:
        with pytest.raises(FigureError, match="attribution ci: an interval must be"):
            render_figure("key_recovery", {"id": "kr", "data": {"methods": "key_recovery_bad.json#key_recovery/by_method"}}, ctx)
    finally:
        bad.unlink()


@pytest.mark.parametrize("headline,n", [("gap", 270), ("attribution", 90)])
def test_spec_curve_one_point_per_specification_and_the_choices_beneath(ctx, headline, n):
    fig = render_figure("spec_curve", curve(headline), ctx)
    rows = [r for r in rankstats.read_jsonl(FIXTURES / "spec_curve.jsonl") if r["headline"] == headline]
    assert fig.marks == len(rows) == n
    for svg in svgs(inlined(fig)).values():
        assert count_concat_marks(svg, "points") == n
    share = sum(r["holds"] for r in rows) / n
    assert f"holds in {share:.0%}" in inlined(fig)
    # attribution has no patching mode: its choices grid has no mode row
    assert ("mode mean" in inlined(fig)) == (headline == "gap")


def test_spec_curve_refuses_a_summary_that_is_not_a_headline(ctx):
    spec = {"id": "sc", "data": {"rows": "spec_curve.jsonl", "summary": "key_recovery.json#key_recovery/by_method"}}
    with pytest.raises(FigureError, match="not the summary of a headline"):
        render_figure("spec_curve", spec, ctx)


def test_their_claims_follow_their_data():
    assert claims.figure_claim("key_recovery", RECOVERY["data"]) == claims.COMPARISON
    assert claims.figure_claim("spec_curve", curve("gap")["data"]) == claims.COMPARISON
    assert claims.figure_claim("spec_curve", curve("attribution")["data"]) == claims.OBSERVATIONAL
    assert claims.figure_claim("spec_curve", curve("patching")["data"]) == claims.CAUSAL
