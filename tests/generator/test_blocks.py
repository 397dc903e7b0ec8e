"""Fenced blocks are parsed once into typed blocks checked against their schema (site_src/schema.py),
and every rule of the site's Markdown, parse and render, is the site plugin's (site_src/markdown.py):
a page renders through markdown-it's own render call."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup, escape

from generator_helpers import git, run, write_page
from site_src import blocks, markdown, schema
from site_src.errors import Errors
from site_src.fixtures import FixtureCache
from site_src.pages import Page
from site_src.render import PageContext
from site_src.resolve import Resolver

REPO = Path(__file__).resolve().parents[2]
INTRO = "## Section\n\nSome text first.\n"   # the body starts at line 5 (front matter 1-4)


def check(site, capsys) -> str:
    """`build.py check` on the site: it must fail; its stderr."""
    git(site, "add", "-A")
    capsys.readouterr()
    assert run(site, "check", stage=False) == 1
    return capsys.readouterr().err


FIGURE = """
```figure
kind: rank_scatter
id: f1
caption: Ranks.
claim: observational vs causal
trsut: exploratory
data:
  atribution: data/rows.jsonl
  patching: data/rows.jsonl
options: {mode: mean, dimenson: safety}
```
"""


def test_a_misspelled_figure_option_or_key_fails_check_with_the_nearest_key(site, capsys):
    write_page(site, "bad.md", INTRO + FIGURE)
    err = check(site, capsys)
    # the fence on line 9: kind 10, id 11, caption 12, claim 13, trsut 14, data 15, atribution 16, options 18
    assert "content/bad.md:14: figure f1: unknown key 'trsut'; did you mean 'trust'?" in err
    assert "content/bad.md:18: figure f1: unknown option 'dimenson'; did you mean 'dimension'?" in err
    assert "content/bad.md:16: figure f1: unknown data key 'atribution'; did you mean 'attribution'?" in err
    assert "content/bad.md:15: figure f1: `data` lacks 'attribution'" in err
    assert "4 error(s)" in err


def test_every_block_error_is_collected(site, capsys):
    table = "\n```table\nsource: data/golden.json#per_dimension_rho\ncolums: [a, b]\nsortt: b\nfmt: .3q\n```\n"
    figure = FIGURE.replace("claim: observational vs causal", "claim: anecdotal").replace("kind: rank_scatter",
                                                                                         "kind: rank_scater")
    write_page(site, "bad.md", INTRO + table + figure)
    err = check(site, capsys)
    expected = [   # the table's fence on line 9, the figure's on line 16
        "content/bad.md:11: table block: unknown key 'colums'; did you mean 'columns'?",
        "content/bad.md:12: table block: unknown key 'sortt'; did you mean 'sort'?",
        "content/bad.md:13: table fmt: ",
        "content/bad.md:17: figure f1: unknown figure kind 'rank_scater'; did you mean 'rank_scatter'?",
        "content/bad.md:21: figure f1: unknown key 'trsut'; did you mean 'trust'?",
        "content/bad.md:20: figure f1: unknown claim 'anecdotal'",
    ]
    for fragment in expected:
        assert fragment in err, err
    assert f"{len(expected)} error(s)" in err


def test_a_misspelled_table_key_and_front_matter_field_name_the_nearest(site, capsys):
    write_page(site, "bad.md", INTRO + "\n```table\nsource: data/golden.json#per_dimension_rho\ncaptoin: Rho\n```\n",
               "title: T\nsummary: S\nsumary: again\n")
    err = check(site, capsys)
    # three front-matter fields: the body starts on line 6, the table's fence on 10
    assert "content/bad.md:12: table block: unknown key 'captoin'; did you mean 'caption'?" in err
    assert "content/bad.md:4: unknown front-matter field 'sumary'; did you mean 'summary'?" in err


def test_every_figure_kind_declares_what_it_reads():
    """The options and data keys each figure kind reads (site_src/figures/<kind>.py) are the ones
    the schema declares for it, so a declared key is never ignored and a read one never refused."""
    figures = REPO / "site_src" / "figures"
    ranked = _keys_read(figures / "data.py", only="ranked_spec")   # what the ranking kinds share
    assert ranked["options"] and ranked["data"]
    for kind, declared in schema.FIGURE_KINDS.items():
        read = _keys_read(figures / f"{kind}.py")
        if read["ranked"]:
            read["options"] |= ranked["options"]
            read["data"] |= ranked["data"]
        assert read["options"] <= set(declared.options) | set(schema.COMMON_OPTIONS), kind
        assert read["data"] == set(declared.data), kind


def _keys_read(path: Path, only: str = "") -> dict:
    """The option and data names a figure kind's module (or its function `only`) reads from its spec."""
    found = {"options": set(), "data": set(), "ranked": False}
    tree = ast.parse(path.read_text())
    if only:
        tree = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == only)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            literal = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if name in ("size_option", "format_option") and literal:
                found["options"].add(literal[0])
            elif name == "spec_data" and literal:
                found["data"].add(literal[0])
            elif name == "get" and literal and getattr(node.func.value, "id", "") == "opts":
                found["options"].add(literal[0])
            elif name == "ranked_spec":
                found["ranked"] = True
    return found


# ---------------------------------------------------------------- the plugin owns its rules

def _context(site) -> PageContext:
    page = Page("p.md", "content/p.md", "p/", {}, {}, "")
    files_root = site
    resolver = Resolver(files_root, None, FixtureCache())
    from site_src.stages.load import make_env
    return PageContext(page, Errors(), resolver, {}, make_env(resolver.files), site)


def test_a_page_renders_through_markdown_its_own_render_call(site):
    """Receipts, literals, tables and math come out of `md.render` alone: no walk of the tokens
    outside markdown-it prepares them."""
    ctx = _context(site)
    md = markdown.make_parser()
    html = md.render("## Rho {{ data/golden.json:5 }}\n\nRatio {{ data/golden.json#ratio | fmt .2f }},"
                     " {{! 0.5 }}, $x^2$.\n\n```table\nsource: data/golden.json#per_dimension_rho\n```\n",
                     {"page": ctx})
    assert not ctx.errors, ctx.errors.lines()
    assert '<a class="ref" href="../source/data/golden.json.html#L5" id="ref-1"' in html
    assert ">0.13</a>" in html and "0.5" in html and "<math" in html
    assert html.count('class="ref"') == 5   # the heading's value, the ratio, and three table cells
    assert ctx.out.headings == [("rho", "Rho -0.170885")]   # the contents show the value


def test_no_token_meta_html_echo_and_no_token_walk_outside_the_plugin():
    """Only the site plugin's modules touch markdown-it tokens, and no rule echoes HTML that
    something else prepared in token.meta."""
    plugin = {"markdown.py", "render.py", "tablewrap.py"}
    touches = re.compile(r"\b(?:from|import) markdown_it\b|\btokens?\.(?:type|meta|children|info)\b|\.tokens\b")
    for path in sorted((REPO / "site_src").rglob("*.py")):
        text = path.read_text()
        assert 'meta["html"]' not in text and "meta['html']" not in text, path
        rel = path.relative_to(REPO / "site_src").as_posix()
        if rel not in plugin and not rel.startswith("blocks/"):
            assert not touches.search(text), f"{rel} walks markdown-it tokens: {touches.search(text).group(0)}"


def test_a_new_block_kind_is_a_parse_rule_a_render_rule_and_a_schema_entry(monkeypatch, site):
    """The extension point docs/ARCHITECTURE.md describes, exercised with a toy kind."""
    note_schema = schema.Schema({"text": schema.Field("what the note says", required=True)},
                                unknown="unknown key", kind_name="key", missing="")

    @dataclass(frozen=True)
    class Note:
        text: str

    class NoteKind:
        @staticmethod
        def parse(values, lines, ctx, inline):
            if note_schema.check(values, lambda k: ctx.page.where(lines.of(k)), ctx.errors,
                                 missing_at=ctx.page.where(lines.fence), prefix="note block: "):
                return None
            return Note(values["text"])

        @staticmethod
        def render(self, tokens, idx, options, env):
            note = tokens[idx].meta["block"]
            return "" if note is None else str(Markup('<aside class="note">{}</aside>').format(escape(note.text)))

    monkeypatch.setitem(blocks.KINDS, "note", NoteKind)
    ctx = _context(site)
    md = markdown.make_parser()
    html = md.render("```note\ntext: <b>read me</b>\n```\n\n```note\ntxet: typo\n```\n", {"page": ctx})
    assert '<aside class="note">&lt;b&gt;read me&lt;/b&gt;</aside>' in html
    assert ctx.errors.lines() == ["content/p.md:6: note block: unknown key 'txet'; did you mean 'text'? (known: text)",
                                  "content/p.md:5: note block: lacks 'text'"]
