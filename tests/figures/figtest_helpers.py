"""Reading figure output back: the inlined SVGs, their data marks, URLs."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

# one block of every figure kind that draws a chart, over the fixtures above
SPECS = [
    ("rank_scatter", {"id": "a", "data": {"attribution": "attribution_per_pair.jsonl",
                                          "patching": "patching_per_pair.jsonl"}}),
    ("rho_bars", {"id": "b", "data": {"series": [{"label": "toy", "ref": "golden.json#per_dimension_rho"}]}}),
    ("patch_picker", {"id": "c", "data": {"attribution": "attribution_per_pair.jsonl",
                                          "patching": "patching_per_pair.jsonl"}}),
    ("lens_curve", {"id": "d", "data": {"lens": "lens_per_pair.jsonl"}}),
    ("margin_distribution", {"id": "e", "data": {"pairs": "patching_per_pair.jsonl"}}),
    ("heatmap", {"id": "f", "data": {"matrix": "cosines.json#cosines"}}),
    ("key_recovery", {"id": "h", "data": {"methods": "key_recovery.json#key_recovery/by_method"}}),
    ("spec_curve", {"id": "i", "data": {"rows": "spec_curve.jsonl",
                                        "summary": "key_recovery.json#key_recovery/spec_curve/gap"},
                    "options": {"table_rows": 300}}),
    ("removal_curve", {"id": "j", "data": {"where": "removal.json#where", "target": "removal.json#target",
                                           "null_curve": "null_curve.jsonl", "null_sums": "null_directions.jsonl"}}),
]

SVG = re.compile(r'<svg class="fig-svg fig-svg-(light|dark|themed)".*?</svg>', re.S)
# Anything that could make a browser reach another host: absolute or protocol-relative URLs.
URL = re.compile(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}|url\(\s*['\"]?https?:", re.I)


SLOT = re.compile(r'<div class="fig-svg-slot[^"]*" data-figure-svg="(?:\.\./)*(assets/figures/[^"]+\.svg)"[^>]*>'
                  r'<noscript>.*?</noscript></div>', re.S)
ROWS = re.compile(r'<details class="fig-data" data-pagefind-ignore data-figure-rows="(?:\.\./)*(assets/figures/[^"]+)">')


def inlined(fig) -> str:
    """A figure's body as it reads once the loader (figures.js) has run: each large drawing's slot
    holds the drawing from its file, and a long data table has all its rows."""
    def drawing(m):
        svg = fig.files[m.group(1)].decode("utf-8")
        assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" ')
        return svg.replace(' xmlns="http://www.w3.org/2000/svg"', "", 1)
    html = SLOT.sub(drawing, fig.body_html)
    found = ROWS.search(html)
    if found:
        rest = fig.files[found.group(1)].decode("utf-8")
        end = html.index("</tbody>", found.end())
        html = html[:end] + rest + html[end:]
        html = re.sub(r'<p class="fig-more">.*?</p>', "", html, flags=re.S)
        html = html.replace(found.group(0), '<details class="fig-data" data-pagefind-ignore>', 1)
    return html


def svgs(body_html: str) -> dict[str, ET.Element]:
    return {m.group(1): ET.fromstring(m.group(0)) for m in SVG.finditer(body_html)}


def panel_svgs(body_html: str) -> list[ET.Element]:
    """Every drawing of a figure, in order: one per panel of a multi-panel figure."""
    return [ET.fromstring(m.group(0)) for m in SVG.finditer(body_html)]


def count_marks(svg: ET.Element, name: str) -> int:
    """Number of drawn items in the data layer `datamark_<name>` (all facets together)."""
    total = 0
    for group in svg.iter("g"):
        classes = group.get("class", "").split()
        if "role-mark" in classes and f"datamark_{name}_marks" in classes:
            total += len(list(group))
    return total


def payload(fig) -> dict:
    """The live view's spec file of a rendered figure (named by its .fig-live[data-figure-spec])."""
    m = re.search(r'data-figure-spec="(?:\.\./)*(assets/figures/[^"]+\.json)"', fig.body_html)
    return json.loads(fig.files[m.group(1)])


def external_urls(text: str) -> list[str]:
    return URL.findall(text)
