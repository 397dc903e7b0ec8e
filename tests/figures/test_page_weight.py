"""Page weight (issue 29: every page within 200 kB before interaction): a large drawing is a file
of its own that the loader puts in place near the viewport, and a long data table holds its first
rows with the rest in a file added when it is opened; the text alternative stays in the page, and
what the loader completes is exactly what the page held inline before."""
from __future__ import annotations

import importlib
import re
import xml.etree.ElementTree as ET

from site_src.figures import render_figure

from figtest_helpers import SLOT, SPECS, inlined

assemble = importlib.import_module("site_src.figures.assemble")   # the package's `assemble` is the function
CURVE = dict(SPECS)["spec_curve"]     # 270-odd specifications, table_rows 300: a large drawing, a long table


def _all_inline(monkeypatch):
    monkeypatch.setattr(assemble, "SVG_INLINE_MAX", 10**9)
    monkeypatch.setattr(assemble, "INLINE_ROWS", 10**9)


def test_a_large_drawing_is_a_file_its_slot_names(ctx, monkeypatch):
    fig = render_figure("spec_curve", CURVE, ctx)
    slots = SLOT.findall(fig.body_html)
    assert len(slots) == 1 and "<svg" not in fig.body_html.split('<details class="fig-data"')[0]
    data = fig.files[slots[0]]
    assert len(data) > assemble.SVG_INLINE_MAX
    svg = ET.fromstring(data)   # a standalone SVG document, which the <noscript> image shows
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    slot = re.search(r'<div class="fig-svg-slot" data-figure-svg="\.\./(\S+)" data-width="([\d.]+)" '
                     r'data-height="([\d.]+)"><noscript><img src="\.\./(\S+)" alt="" width="(\d+)" height="(\d+)" '
                     r'loading="lazy"></noscript></div>', fig.body_html)
    assert slot and slot.group(1) == slot.group(4) == slots[0]
    assert (slot.group(2), slot.group(3)) == (svg.get("width"), svg.get("height"))
    # the label a screen reader reads stays on the page, on the drawing's box
    assert re.search(r'<div class="fig-static" role="img" aria-label="Specification curve of the gap over \d+ ', fig.body_html)
    # once the loader has run, the page holds what it held inline before
    _all_inline(monkeypatch)
    before = render_figure("spec_curve", CURVE, ctx)
    assert SLOT.search(before.body_html) is None and inlined(fig) == before.body_html


def test_a_small_drawing_stays_in_the_page(ctx, monkeypatch):
    monkeypatch.setattr(assemble, "SVG_INLINE_MAX", 10**9)
    fig = render_figure("spec_curve", CURVE, ctx)
    assert SLOT.search(fig.body_html) is None and '<svg class="fig-svg fig-svg-themed"' in fig.body_html
    assert not any(name.endswith(".svg") for name in fig.files)


def test_every_panel_of_a_panelled_figure_is_placed_on_its_own(ctx, monkeypatch):
    spec = {"id": "pb", "data": {"series": [
        {"label": "this study", "ref": "golden.json#per_dimension_rho", "ci": "golden.json#per_dimension_rho_ci"},
        {"label": "published elsewhere", "ref": "quoted.json#per_dimension_rho"}]}}
    monkeypatch.setattr(assemble, "SVG_INLINE_MAX", 0)
    fig = render_figure("rho_bars", spec, ctx)
    assert [name.rsplit("/", 1)[1].rsplit("-", 1)[0] for name in SLOT.findall(fig.body_html)] == ["pb-p1", "pb-p2"]
    _all_inline(monkeypatch)
    assert inlined(fig) == render_figure("rho_bars", spec, ctx).body_html


def test_a_long_table_holds_its_first_rows_and_names_the_rest(ctx, monkeypatch):
    fig = render_figure("spec_curve", CURVE, ctx)
    found = re.search(r'<details class="fig-data" data-pagefind-ignore data-figure-rows="\.\./(\S+)">', fig.body_html)
    assert found
    table = fig.body_html[found.end():]
    assert table.count("<tr>") == assemble.INLINE_ROWS + 1   # and the header row
    rest = fig.files[found.group(1)].decode()
    csv_rows = next(v for k, v in fig.files.items() if k.endswith(".csv")).count(b"\n") - 1
    assert rest.startswith("<tr>") and rest.count("<tr>") == csv_rows - assemble.INLINE_ROWS
    assert f"The first {assemble.INLINE_ROWS} of these {csv_rows} rows are here" in table
    _all_inline(monkeypatch)
    assert inlined(fig) == render_figure("spec_curve", CURVE, ctx).body_html


def test_a_short_table_is_whole_in_the_page(ctx):
    fig = render_figure("key_recovery", dict(SPECS)["key_recovery"], ctx)
    assert "data-figure-rows" not in fig.body_html and "fig-more" not in fig.body_html
    assert not any(name.endswith(".rows.txt") for name in fig.files)
