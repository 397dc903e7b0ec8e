"""Each bad input fails the build with the page file:line and the fixture file:line, exits non-zero,
and leaves the previous public/ byte-for-byte as it was."""
import os

import pytest

from generator_helpers import run, tree_digest, write_page

INTRO = "## Section\n\nSome text first.\n"   # body starts at line 5; the reference sits on line 8


def _fail(site, capsys):
    assert run(site) == 0, "the fixture repository must build before the bad input is added"
    capsys.readouterr()
    before = tree_digest(site / "public")
    return before


def _assert_refused(site, capsys, before, *fragments):
    code = run(site)
    err = capsys.readouterr().err
    assert code == 1, err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    assert "public/ left as it was" in err
    assert tree_digest(site / "public") == before
    return err


@pytest.mark.parametrize("ref, fixture, message", [
    ("data/nope.json:3", "[fixture data/nope.json]", "fixture file not found"),
    ("data/golden.json:99", "[fixture data/golden.json]", "line 99 is out of range"),
    ("data/golden.json:14", "[fixture data/golden.json:14]", "line holds no value"),
    ("data/golden.json#counts/nope", "[fixture data/golden.json:6]", "no key path 'counts/nope'"),
    ("data/golden.json:8#counts/pairs", "[fixture data/golden.json:8]", "which is now at line 7"),
    ("data/broken.jsonl | count", "[fixture data/broken.jsonl:2]", "row does not parse as JSON"),
    ("data/nan.json:3", "[fixture data/nan.json:3]", "not a finite number"),
    ("data/nanrows.jsonl | mean x", "[fixture data/nanrows.jsonl:2]", "not a finite number"),
    ("data/golden.json:17", "[fixture data/golden.json:17]", "holds null"),
    ("data/golden.json:10", "[fixture data/golden.json:10]", "resolves to a block"),
    ("data/golden.json:5 | fmt ,d", "[fixture data/golden.json:5]", "cannot format"),
    ("data/rows.jsonl | mean nope", "[fixture data/rows.jsonl:1]", "no field 'nope'"),
    ("../outside.json:1", "[fixture ../outside.json]", "outside the repository"),
])
def test_bad_reference(site, capsys, ref, fixture, message):
    (site / "data/broken.jsonl").write_text('{"x": 1}\n{"x": \n')
    (site / "data/nan.json").write_text('{\n  "ok": 1,\n  "bad": NaN\n}\n')
    (site / "data/nanrows.jsonl").write_text('{"x": 1.0}\n{"x": NaN}\n')
    (site.parent / "outside.json").write_text('{"a": 1}\n')
    before = _fail(site, capsys)
    write_page(site, "bad.md", INTRO + f"\nThe value {{{{ {ref} }}}} here.\n")
    err = _assert_refused(site, capsys, before, f"content/bad.md:9: {{{{ {ref} }}}}: ", message, fixture)
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1


@pytest.mark.parametrize("body, expected", [
    ("\nrho was 0.17 in the draft.\n", "content/bad.md:9: number '0.17' in prose is not bound"),
    ("\nIt moved 12% of the margin.\n", "content/bad.md:9: number '12%'"),
    ("\nFirst line,\nthen -3 on the second.\n", "content/bad.md:10: number '-3'"),
    ("\n| a | b |\n|---|---|\n| x | 0.5 |\n", "content/bad.md:11: number '0.5'"),
    ("\n- item\n- item +2\n", "content/bad.md:10: number '+2'"),
    ("\nSee [the mean {{ data/golden.json:5 }}](../explainer/).\n",
     "content/bad.md:9: {{ data/golden.json:5 }}: a reference cannot sit inside link text"),
    ("\nSee [[fig:nowhere]].\n", "content/bad.md:9: [[fig:nowhere]]: no figure with id 'nowhere'"),
    ("\nBad {{ data/golden.json:x }}.\n", "content/bad.md:9: {{ data/golden.json:x }}: 'data/golden.json:x' is not a source"),
    ("\nOpen {{ data/golden.json:5 here.\n", "content/bad.md:9: '{{' is not closed"),
    ("\n# A second title\n", "content/bad.md:9: use '##' and below"),
    ("\n#### Too deep\n", "content/bad.md:9: heading level jumps from h2 to h4"),
    ("\nThe sum $\\frac{1}{$ breaks.\n", "content/bad.md:9: math does not convert"),
    ("\n```table\nsource: data/golden.json:10\ncolumns: [a, b, c]\n```\n",
     "content/bad.md:11: table: 'columns' must list 2 headers"),
    ("\n```table\nsource: data/golden.json:5\n```\n", "content/bad.md:10: table source 'data/golden.json:5' is a single value"),
    ("\n```table\nsource: data/golden.json:10\ncolour: red\n```\n", "content/bad.md:11: table block: unknown key 'colour'"),
    ("\n```figure\nkind: rank_scatter\nid: f1\ncaption: x\nclaim: anecdotal\n```\n",
     "content/bad.md:13: figure f1: unknown claim 'anecdotal'"),
])
def test_bad_page_body(site, capsys, body, expected):
    before = _fail(site, capsys)
    write_page(site, "bad.md", INTRO + body)
    _assert_refused(site, capsys, before, expected)


@pytest.mark.parametrize("front, expected", [
    ("title: T\nsummary: S\ncolour: blue\n", "content/bad.md:4: unknown front-matter field 'colour'"),
    ("title: T\nsummary: S\ntrust: certain\n", "content/bad.md:4: unknown trust 'certain'"),
    ("title: T\nsummary: S\nclaim: anecdotal\n", "content/bad.md:4: unknown claim 'anecdotal'"),
    ("title: T\n", "content/bad.md:1: front matter lacks 'summary'"),
    ("title: T\nsummary: Moved 0.5 points\n", "content/bad.md:3: number '0.5'"),
    ("title: T\nsummary: S\nbundle: nosuchstudy\n", "content/bad.md:4: bundle 'nosuchstudy' not found"),
    ("title: [unclosed\n", "content/bad.md:"),
])
def test_bad_front_matter(site, capsys, front, expected):
    before = _fail(site, capsys)
    write_page(site, "bad.md", INTRO, front)
    _assert_refused(site, capsys, before, expected)


def test_study_page_needs_study_fields(site, capsys):
    before = _fail(site, capsys)
    write_page(site, "bad.md", INTRO, "title: T\nsummary: S\nbundle: demo\n")
    err = _assert_refused(site, capsys, before, "front matter lacks 'subject' (study pages")
    for name in ("question", "access", "trust", "claim"):
        assert f"lacks {name!r}" in err


def test_bad_site_config(site, capsys):
    before = _fail(site, capsys)
    config = site / "content/site.yaml"
    config.write_text(config.read_text() + "  - missing.md\ncolour: red\n")
    _assert_refused(site, capsys, before, "content/site.yaml:6: nav entry 'missing.md' names no page",
                    "content/site.yaml:7: unknown key 'colour'")


def test_every_error_is_reported(site, capsys):
    before = _fail(site, capsys)
    write_page(site, "bad.md", INTRO + "\n{{ data/golden.json:99 }} and 0.5\n\nand {{ data/nope.json:1 }}\n",
               "title: T\nsummary: S\ntrust: certain\n")
    err = _assert_refused(site, capsys, before, "content/bad.md:4: unknown trust", "content/bad.md:10: {{ data/golden.json:99 }}",
                          "content/bad.md:10: number '0.5'", "content/bad.md:12: {{ data/nope.json:1 }}")
    assert "4 error(s)" in err


def test_fixture_edit_that_moves_a_line_is_caught(site, capsys):
    """A stale receipt is a lie: when a fixture gains a line, a line+key reference fails."""
    before = _fail(site, capsys)
    write_page(site, "bad.md", INTRO + "\nPairs: {{ data/golden.json:7#counts/pairs }}.\n")
    assert run(site) == 0
    capsys.readouterr()
    before = tree_digest(site / "public")
    golden = site / "data/golden.json"
    golden.write_text(golden.read_text().replace('  "counts": {\n', '  "counts": {\n    "added": 1,\n'))
    _assert_refused(site, capsys, before, "content/bad.md:9: {{ data/golden.json:7#counts/pairs }}: line 7 holds 'counts/added'",
                    "now at line 8", "[fixture data/golden.json:7]")


def test_failed_build_without_previous_public_writes_nothing(site, capsys):
    write_page(site, "bad.md", INTRO + "\n{{ data/golden.json:99 }}\n")
    assert run(site) == 1
    assert not os.path.lexists(site / "public")
    builds = site / ".public.builds"
    assert not builds.exists() or [p.name for p in builds.iterdir()] == [".lock"]
