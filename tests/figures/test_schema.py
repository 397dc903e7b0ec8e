"""Every figure kind's Vega-Lite specs are valid against the Vega-Lite schema.

A build never asks Altair to check a spec (site_src/figures/assemble.py draws with
`to_dict(validate=False)`: the check was a third of a cold build, and a kind's specs differ from
build to build only in their data). The check is made here instead, once, on a block of every
kind that draws a chart, in both themes, with its data in place as the build sends it.
"""
from __future__ import annotations

import altair as alt
import pytest
from altair.utils import schemapi
from altair.vegalite.v6.schema import core

from site_src.figures import KINDS, render_figure
from site_src.figures import render as fig_render

from figtest_helpers import SPECS

HTML_ONLY = {"top_lists"}   # kinds without a chart: a table of receipts, nothing to check


def drawn_specs(ctx, monkeypatch) -> dict[str, list[dict]]:
    """{kind: the Vega-Lite specs its block hands to be drawn (light and dark, every panel)}."""
    sent: list = []
    start = fig_render.start_draws

    def spy(vl_specs, cache_dir, *args, **kwargs):
        sent.extend(vl_specs)
        return start(vl_specs, cache_dir, *args, **kwargs)
    monkeypatch.setattr(fig_render, "start_draws", spy)
    out = {}
    for kind, spec in SPECS:
        before = len(sent)
        render_figure(kind, spec, ctx)
        out[kind] = sent[before:]
    return out


def test_every_kind_with_a_chart_is_checked():
    assert {kind for kind, _ in SPECS} == set(KINDS) - HTML_ONLY


def test_every_kind_draws_valid_vega_lite(ctx, monkeypatch):
    schema = core.load_schema()
    for kind, specs in drawn_specs(ctx, monkeypatch).items():
        assert len(specs) >= 2, kind   # light and dark
        for vl in specs:
            error = schemapi.validate_jsonschema(vl, schema, raise_error=False)
            assert error is None, f"{kind}: {error}"


def test_the_schema_check_can_fail():
    bad = alt.Chart(alt.NamedData(name="x")).mark_point().encode(x="a:Q").to_dict(validate=False)
    bad["mark"] = {"type": "no-such-mark"}
    assert schemapi.validate_jsonschema(bad, core.load_schema(), raise_error=False) is not None


def test_a_build_does_not_check_specs_against_the_schema(ctx, monkeypatch):
    """No check of a chart, neither of the spec written (`to_dict(validate=True)`) nor of each
    object made (Altair's debug mode). What Altair still checks on its own costs little: the
    parameters it lifts out of layers, its choice of a class for a shorthand, a `.properties()`
    value."""
    calls = []
    check = schemapi.SchemaBase.validate.__func__

    def counted(cls, *args, **kwargs):
        calls.append(cls.__name__)
        return check(cls, *args, **kwargs)
    monkeypatch.setattr(schemapi.SchemaBase, "validate", classmethod(counted))
    specs = drawn_specs(ctx, monkeypatch)
    assert sum(map(len, specs.values())) > len(SPECS)
    assert set(calls) <= {"VariableParameter"}, sorted(set(calls))
    assert schemapi.DEBUG_MODE   # the build turned it off for its own figures only


def test_a_chart_made_once_with_placeholders_equals_one_made_for_each_theme(ctx):
    """A build makes each chart once, with palette placeholders, and puts each theme's colours
    into its dict (assemble._vega_lite): for every kind, the specs equal the ones made from each
    theme's palette directly, as builds did before."""
    from importlib import import_module

    assemble = import_module("site_src.figures.assemble")   # the package exports its function of that name
    from site_src.figures.theme import PALETTES, THEMES, vega_config

    for kind, spec in SPECS:
        parts = import_module(f"site_src.figures.{kind}").build(spec, ctx)
        direct = []
        with schemapi.debug_mode(False):
            for theme in THEMES:
                charts = parts.chart(PALETTES[theme])
                for chart in charts if isinstance(charts, list) else [charts]:
                    vl = chart.to_dict(validate=False)
                    vl["datasets"] = {**vl.get("datasets", {}), **parts.datasets}
                    vl["config"] = assemble._merge(vega_config(PALETTES[theme]), vl.get("config", {}))
                    vl["description"] = parts.alt
                    direct.append(vl)
        assert assemble._vega_lite(parts) == direct, kind


def test_a_palette_value_inside_a_string_is_refused():
    from importlib import import_module

    assemble = import_module("site_src.figures.assemble")   # the package exports its function of that name

    text = assemble._PLACEHOLDERS["text"]
    assert assemble._with_palette({"mark": {"color": text}}, {"text": "#000"}) == {"mark": {"color": "#000"}}
    with pytest.raises(ValueError, match="inside a string"):
        assemble._with_palette({"calculate": f"'{text}' + datum.x"}, {"text": "#000"})
