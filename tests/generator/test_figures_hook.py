"""The generator's side of the figure contract, with a stand-in figures module (the real one has
its own tests): numbering, captions with references, chips, cross-references, files and assets."""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

import site_src.figures as figures
from generator_helpers import run, tree_digest, write_page
from site_src import schema


@dataclass
class FakeContext:
    resolve_path: Callable
    resolve_ref: Callable
    receipt_html: Callable
    cache_dir: Path
    asset_prefix: str
    read_rows: Callable = None


@dataclass
class FakeRendered:
    body_html: str
    files: dict = field(default_factory=dict)
    marks: int = 0
    sources: list = field(default_factory=list)


def fake_render(kind, spec, ctx, deferred=False):
    if kind == "broken":
        raise ValueError("this kind cannot draw")
    path = ctx.resolve_path(spec["data"]["rows"])
    mean = ctx.resolve_ref(f"{spec['data']['rows']} | mean margin | fmt .2f")
    hidden = ctx.resolve_ref(f"{spec['data']['rows']} | count")
    body = (f'<img src="{ctx.asset_prefix}fake.svg" alt="{kind}: {path.name}"><p>mean '
            f'{ctx.receipt_html(mean, mean.display)}</p>')
    return FakeRendered(body, files={f"figures/{spec['id']}.csv": b"a,b\n"}, marks=6, sources=[mean, hidden])


@pytest.fixture
def fake_figures(monkeypatch):
    # the stand-in kinds are declared as every kind is, in the schema
    for kind in ("dots", "broken"):
        monkeypatch.setitem(schema.FIGURE_KINDS, kind, schema.FigureKind(
            "a stand-in", None, {"rows": schema.Field("rows", required=True)}))
    monkeypatch.setattr(figures, "FigureContext", FakeContext, raising=False)
    monkeypatch.setattr(figures, "render_figure", fake_render, raising=False)
    monkeypatch.setattr(figures, "figure_assets", lambda cache_dir=None: {"fake.svg": b"<svg/>"}, raising=False)
    monkeypatch.setattr(figures, "figure_head_html",
                        lambda prefix: f'<link rel="stylesheet" href="{prefix}fake.css">', raising=False)


def figure(fig_id, kind="dots", claim="observational", extra=""):
    return (f"```figure\nkind: {kind}\nid: {fig_id}\ncaption: Margins, mean {{{{ data/golden.json:5 | fmt .2f }}}}.\n"
            f"claim: {claim}\ndata:\n  rows: data/rows.jsonl\n{extra}```\n")


def test_figures_are_numbered_and_linked(site, fake_figures):
    write_page(site, "explainer.md",
               "## Figures\n\nSee [[fig:first]] and [[fig:second]].\n\n" + figure("first") + "\n"
               + figure("second", claim="causal", extra="trust: calibrated\n"),
               "title: Figures\nsummary: Two figures.\ntrust: exploratory\ncalibration: cal\n")
    write_page(site, "guides/second.md", "## Elsewhere\n\nAs [[fig:second]] shows.\n")
    # 'calibrated' must cite a study whose key is true by construction (site_src/honesty/rungs.py)
    (site / "bundles/cal").mkdir()
    (site / "bundles/cal/key.json").write_text('{"construction": "hand-set weights"}\n')
    (site / "bundles/cal/golden.json").write_text('{"key_check": {"all_pass": true}}\n')
    assert run(site) == 0
    html = (site / "public/explainer/index.html").read_text()
    assert '<link rel="stylesheet" href="../assets/fake.css">' in html  # figure pages load the figure CSS
    assert "fake.css" not in (site / "public/guides/second/index.html").read_text()
    # the explainer is second in nav, so its figures are 2.1 and 2.2
    assert '<a class="fig-link" href="#fig-first">Fig.&nbsp;2.1</a>' in html
    assert '<a class="fig-link" href="#fig-second">Fig.&nbsp;2.2</a>' in html
    assert '<figure class="fig" id="fig-first">' in html
    assert '<span class="fig-num">Fig. 2.1</span> Margins, mean <a class="ref" ' in html
    assert '<span class="chip claim claim-observational">observational</span> <span class="chip trust trust-exploratory">' in html
    assert '<span class="chip claim claim-causal">causal</span> <span class="chip trust trust-calibrated">' in html
    assert '<img src="../assets/fake.svg" alt="dots: rows.jsonl">' in html
    # values drawn by the figure are in the provenance table, once each
    section = (site / "public/explainer/provenance.html").read_text()
    rows = section[section.index("<code>data/rows.jsonl</code>"):].split("</table>")[0]
    assert rows.count("<td>computed</td>") == 4  # mean margin and count, once per figure
    other = (site / "public/guides/second/index.html").read_text()
    assert '<a class="fig-link" href="../../explainer/#fig-second">Fig.&nbsp;2.2</a>' in other
    assert (site / "public/assets/fake.svg").read_bytes() == b"<svg/>"
    assert (site / "public/figures/first.csv").is_file()
    assert (site / "public/source/data/rows.jsonl").is_file()


def test_figure_errors_are_placed(site, fake_figures, capsys):
    assert run(site) == 0
    capsys.readouterr()
    before = tree_digest(site / "public")
    write_page(site, "bad.md", "## A\n\ntext\n\n" + figure("one", kind="broken") + "\n" + figure("one"))
    assert run(site) == 1
    err = capsys.readouterr().err
    assert "content/bad.md:9: figure one: ValueError: this kind cannot draw" in err
    assert "content/bad.md:18: figure id 'one' is already used at content/bad.md:9" in err
    assert tree_digest(site / "public") == before


def test_assets_only_when_a_page_has_a_figure(site, fake_figures):
    assert run(site) == 0
    assert not (site / "public/assets/fake.svg").exists()
