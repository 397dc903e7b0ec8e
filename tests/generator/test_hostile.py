"""A hostile author's inputs: each one lied, hung, crashed, injected markup or wrote without bound
before the fixes. A refused input must give `page:line` errors, exit 1, and leave the repository
(.git included), the published site and everything outside untouched."""
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from generator_helpers import REPO, refused, run, snapshot, tree_digest, write_page

INTRO = "## Section\n\nSome text first.\n"   # the body's first line is line 5; a line after it is 9


def _page(site, body, front="title: Bad page\nsummary: A page with a problem.\n", name="bad.md"):
    write_page(site, name, INTRO + body, front)


def _built(site) -> None:
    """A previous good build, so that refusals can be seen to leave it alone."""
    assert run(site) == 0


def _html(site, name="bad") -> str:
    return (site / "public" / name / "index.html").read_text()


# ---------------------------------------------------------------- bounded parsing

def test_duplicate_json_key_is_an_error_not_a_lie(site, capsys):
    _built(site)
    (site / "data/dup.json").write_text('{\n  "a": 1.5,\n  "a": 2.5\n}\n')
    _page(site, "\nThe value {{ data/dup.json:2 }}.\n")
    refused(capsys, site, expect=("content/bad.md:9: {{ data/dup.json:2 }}: does not parse: duplicate key 'a' "
                                  "(first at line 2)", "[fixture data/dup.json:3]"))


def test_duplicate_key_in_a_jsonl_row_and_in_front_matter(site, capsys):
    _built(site)
    (site / "data/duprow.jsonl").write_text('{"x": 1}\n{"x": 1, "x": 2}\n')
    _page(site, "\nThe value {{ data/duprow.jsonl | sum x }}.\n")
    refused(capsys, site, expect=("content/bad.md:9: {{ data/duprow.jsonl | sum x }}: row does not parse as JSON "
                                  "(duplicate key 'x'", "[fixture data/duprow.jsonl:2]"))
    _page(site, "\nText.\n", "title: T\nsummary: S\ntitle: again\n")
    refused(capsys, site, expect=("content/bad.md:4: front matter: duplicate key 'title' (first at line 2)",))


@pytest.mark.parametrize("text", [
    '{"a": 1, "a": 2}',                       # the plain case
    '{"\\u0061": 1, "a": 2}',                  # one key written with an escape
    '{"x": {"k": 1, "k": 2}}',                # nested
    '[{"k": 1, "k": 1}]',                     # in a list, the same value twice
    '{"a": "a", "b": {"c": 1, "c": 2}}',      # a key that is also a value elsewhere
])
def test_a_duplicate_key_is_refused_however_the_row_is_read(text):
    """site_src/parse.json_value reads most rows with the plain decoder (a cold build's parsing
    time): no duplicate may take that way."""
    from site_src.parse import ParseProblem, json_value

    with pytest.raises(ParseProblem, match="duplicate key"):
        json_value(text)
    assert json_value('{"a": "a", "b": [{"c": 1}, {"c": 2}], "d": NaN}')["b"] == [{"c": 1}, {"c": 2}]


BOMB = textwrap.dedent("""\
    a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
    value: 1
""")


def _build_in_subprocess(site, timeout=120) -> subprocess.CompletedProcess:
    """A hang is a failure, not a stuck test run."""
    return subprocess.run([sys.executable, str(REPO / "build.py"), "--root", str(site)], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("name, ref, expect", [
    ("data/bomb.yaml", "data/bomb.yaml#value", "[fixture data/bomb.yaml:6]"),
])
def test_yaml_alias_bomb_is_refused_quickly(site, capsys, name, ref, expect):
    _built(site)
    (site / name).write_text(BOMB)
    _page(site, f"\nThe value {{{{ {ref} }}}}.\n")
    from generator_helpers import git
    git(site, "add", "-A")
    before = snapshot(site)
    started = time.monotonic()
    done = _build_in_subprocess(site)
    assert time.monotonic() - started < 60
    assert done.returncode == 1, done.stderr
    assert f"content/bad.md:9: {{{{ {ref} }}}}: does not parse: expands to more than 200,000 values" in done.stderr
    assert expect in done.stderr and "Traceback" not in done.stderr
    assert snapshot(site) == before


def test_alias_bomb_in_front_matter(site, capsys):
    _built(site)
    front = "title: T\nsummary: S\n" + "".join(BOMB.splitlines(True)[:9])
    _page(site, "\nText.\n", front)
    from generator_helpers import git
    git(site, "add", "-A")
    done = _build_in_subprocess(site)
    assert done.returncode == 1 and "content/bad.md:" in done.stderr and "expands to more than" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name, text, ref", [
    ("data/deep.json", "[" * 100_000 + "]" * 100_000 + "\n", "data/deep.json#0"),
    ("data/deep.yaml", "a: " + "[" * 100_000 + "]" * 100_000 + "\n", "data/deep.yaml#a"),
    ("data/deep.jsonl", '{"x": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n", "data/deep.jsonl | count"),
])
def test_deep_nesting_is_refused(site, capsys, name, text, ref):
    _built(site)
    (site / name).write_text(text)
    _page(site, f"\nThe value {{{{ {ref} }}}}.\n")
    err = refused(capsys, site, expect=(f"content/bad.md:9: {{{{ {ref} }}}}: ",))
    assert "nested" in err


def test_long_file_name_is_an_error(site, capsys):
    _built(site)
    ref = "data/" + "x" * 20_000 + ".json:1"
    _page(site, f"\nThe value {{{{ {ref} }}}}.\n")
    err = refused(capsys, site, expect=("content/bad.md:9: {{ data/xxx",))
    assert len(err.splitlines()) == 2


@pytest.mark.parametrize("stage", ["fmt >100000000", "fmt .100000000f", "fmt 0999999d"])
def test_format_width_is_bounded(site, capsys, stage):
    _built(site)
    _page(site, f"\nThe value {{{{ data/golden.json:5 | {stage} }}}}.\n")
    refused(capsys, site, expect=(f"content/bad.md:9: {{{{ data/golden.json:5 | {stage} }}}}: ", "is more than 40"))


def test_figure_size_options_are_bounded(site, capsys):
    _built(site)
    (site / "data/m.json").write_text('{\n  "m": {"a": {"a": 1, "b": 0.5}, "b": {"a": 0.5, "b": 1}}\n}\n')
    _page(site, "\n```figure\nkind: heatmap\nid: big\ncaption: Cells.\nclaim: observational\n"
                "data: {matrix: \"data/m.json#m\"}\noptions: {cell: 100000000}\n```\n")
    refused(capsys, site, expect=("content/bad.md:9: figure big: ", "option `cell` must be a whole number from 8 to 200"))


# ---------------------------------------------------------------- values that lied

def test_empty_jsonl_is_an_error(site, capsys):
    _built(site)
    (site / "data/empty.jsonl").write_text("")
    (site / "data/blank.jsonl").write_text("\n\n")
    _page(site, "\nRows {{ data/empty.jsonl | count }} and {{ data/blank.jsonl | count }}.\n")
    refused(capsys, site, expect=("content/bad.md:9: {{ data/empty.jsonl | count }}: has no rows",
                                  "content/bad.md:9: {{ data/blank.jsonl | count }}: has no rows"))


def test_reference_in_a_heading_keeps_its_value_in_the_contents(site):
    _page(site, "\n## Mean rho {{ data/golden.json:5 }} overall\n\nText.\n")
    assert run(site) == 0
    html = _html(site)
    contents = html[html.index('<nav class="toc"') if '<nav class="toc"' in html else 0:]
    assert re.search(r'<a href="#mean-rho[^"]*">Mean rho -0\.170885 overall</a>', contents), contents[:2000]


@pytest.mark.parametrize("number", ["0,55", "0·55", "⅓", "3/4"])
def test_number_rule_catches_other_decimal_signs(site, capsys, number):
    _built(site)
    _page(site, f"\nThe rho was {number} in the draft.\n")
    refused(capsys, site, expect=(f"content/bad.md:9: number {number!r} in prose is not bound",))


def test_digit_string_key_resolves(site):
    (site / "data/layers.json").write_text('{\n  "by_layer": {\n    "0": 1.5,\n    "1": 2.5\n  },\n  "l": [7, 8]\n}\n')
    _page(site, "\nLayer 0 {{ data/layers.json#by_layer/0 }}, list {{ data/layers.json#l/1 }}.\n")
    assert run(site) == 0
    html = _html(site)
    assert re.search(r'href="\.\./source/data/layers\.json\.html#L3" id="ref-\d+">1\.5</a>', html) and ">8</a>" in html


def test_receipts_of_odd_file_names_are_url_encoded(site):
    name = "a%b?.json"
    (site / "data" / name).write_text('{\n  "v": 0.25\n}\n')
    _page(site, f"\nValue {{{{ data/{name}#v }}}}.\n")
    assert run(site) == 0
    html = _html(site)
    assert 'href="../source/data/a%25b%3F.json.html#L2"' in html
    assert (site / "public/source/data" / f"{name}.html").is_file()


def test_sitemap_is_valid_xml_with_odd_page_names(site):
    write_page(site, "r&d.md", INTRO)
    assert run(site) == 0
    tree = ET.fromstring((site / "public/sitemap.xml").read_bytes())
    locs = [e.text for e in tree.iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")]
    assert "https://example.org/fixture/r&d/" in locs
    assert 'href="../r&amp;d/"' in (site / "public/explainer/index.html").read_text()


def test_table_sort_over_a_null_is_a_page_error(site, capsys):
    _built(site)
    (site / "data/withnull.json").write_text('{\n  "t": {\n    "a": 1,\n    "b": null\n  }\n}\n')
    _page(site, "\n```table\nsource: data/withnull.json#t\nsort: value\n```\n")
    refused(capsys, site, expect=("content/bad.md:11: table sort: column 'value' holds null",
                                  "[fixture data/withnull.json:4]"))


def test_non_numeric_margin_in_figure_data_is_a_page_error(site, capsys):
    _built(site)
    rows = (site / "data/rows.jsonl").read_text().replace('"margin": -0.5', '"margin": "abc"', 1)
    (site / "data/badrows.jsonl").write_text(rows)
    _page(site, "\n```figure\nkind: margin_distribution\nid: margins\ncaption: Margins.\nclaim: observational\n"
                "data: {pairs: data/badrows.jsonl}\n```\n")
    refused(capsys, site, expect=("content/bad.md:9: figure margins: ", "badrows.jsonl:2", "'abc' is not a number"))


# ---------------------------------------------------------------- escaped output

def test_math_text_cannot_inject_markup(site):
    _page(site, '\nSafe $\\text{a<b}$ and $\\text{<img/src="x"/onerror=alert(1)>}$ here.\n')
    assert run(site) == 0
    html = _html(site)
    assert "<mtext>a&lt;b</mtext>" in html
    assert "<img" not in html and "&lt;img/src=" in html


def test_math_links_and_macros_are_refused(site, capsys):
    _built(site)
    _page(site, "\nA $\\href{javascript:alert(1)}{x}$ link.\n\nA $\\def\\a{b}\\a$ macro.\n")
    refused(capsys, site, expect=("content/bad.md:9: math does not convert to MathML: math may not set the attribute 'href'",
                                  "content/bad.md:11: math does not convert to MathML: \\def is not allowed"))


def test_raw_html_is_text_unless_the_page_opts_in(site):
    _page(site, '\n<script>alert(1)</script>\n\nAnd <iframe src="https://other.example/"></iframe> inline.\n')
    assert run(site) == 0
    html = _html(site)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<iframe" not in html


def test_raw_html_opted_in_is_still_checked_for_other_hosts(site, capsys):
    _built(site)
    _page(site, '\n<iframe src="https://other.example/"></iframe>\n\nA <a href="//other.example/x">link</a>'
                ' and <span onclick="x()">this</span>.\n', "title: T\nsummary: S\nraw_html: true\n")
    # the front matter has one line more: the body's lines are 10 and 12
    refused(capsys, site, expect=("content/bad.md:10: raw HTML: <iframe> is not allowed",
                                  "content/bad.md:10: raw HTML: <iframe src='https://other.example/'>: names another host",
                                  "content/bad.md:12: raw HTML: <a href='//other.example/x'>: names another host",
                                  "content/bad.md:12: raw HTML: <span onclick=...>: event handlers"))


def test_raw_html_opted_in_and_harmless_is_kept(site):
    _page(site, '\n<details><summary>More</summary>\n\nHidden text.\n\n</details>\n',
          "title: T\nsummary: S\nraw_html: true\n")
    assert run(site) == 0
    assert "<details><summary>More</summary>" in _html(site)


# ---------------------------------------------------------------- one error type; writing that fails

def test_unexpected_exception_is_a_page_line_error(site, capsys, monkeypatch):
    import site_src.render as render
    _built(site)

    def broken(*args):
        raise KeyError("converter state")
    monkeypatch.setattr(render, "receipt_html", broken)
    capsys.readouterr()
    before = tree_digest(site / "public")
    write_page(site, "explainer.md", INTRO + "\nA value {{ data/golden.json:5 }}.\n")
    assert run(site) == 1
    err = capsys.readouterr().err
    assert "error: content/explainer.md:9: internal error: KeyError: 'converter state' (a bug in the generator" in err
    assert "Traceback" not in err and tree_digest(site / "public") == before


def test_unexpected_exception_outside_a_page(site, capsys, monkeypatch):
    import site_src.stages.load as load_stage
    monkeypatch.setattr(load_stage, "load_config", lambda *a: 1 / 0)
    assert run(site) == 1
    assert "error: build: internal error: ZeroDivisionError" in capsys.readouterr().err


def test_unwritable_parent_gives_one_line(site, capsys):
    err = refused(capsys, site, "--out", "/proc/no-such-site/public", expect=("error: cannot write the site to",))
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1


_FULL_DISK = """
import resource, sys
sys.path.insert(0, {repo!r})
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))   # a disk that is full after 4 kB a file
import build
sys.exit(build.main(["--root", {root!r}]))
"""


def test_full_disk_gives_one_line_and_keeps_public(site):
    _built(site)
    (site / "data/notes.txt").write_text((site / "data/notes.txt").read_text() + "More text.\n")
    from generator_helpers import git
    git(site, "add", "-A")
    live = Path(os.path.realpath(site / "public"))
    before = tree_digest(live)
    done = subprocess.run([sys.executable, "-c", _FULL_DISK.format(repo=str(REPO), root=str(site))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "error: cannot write the site to" in done.stderr and "File too large" in done.stderr
    assert "Traceback" not in done.stderr
    assert Path(os.path.realpath(site / "public")) == live and tree_digest(live) == before
    assert sorted(p.name for p in (site / ".public.builds").iterdir()) == [".lock", live.name]


def test_serve_survives_a_crashing_build(site, capsys):
    from site_src.serve import serve
    from site_src.site import build
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    calls = []

    def build_and_report():
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        build(site)
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(site, site / "public", port, build_and_report),
                              kwargs={"interval": 0.1, "stop": stop}, daemon=True)
    thread.start()
    def wait(condition, what):
        deadline = time.time() + 90
        while time.time() < deadline:
            if condition():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}")

    def served() -> str:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/explainer/", timeout=5).read().decode()
        except OSError:
            return ""
    try:
        page = site / "content/explainer.md"
        wait(lambda: "Every reference kind" in served(), "the first build")
        page.write_text(page.read_text() + "\nfirst edit\n")
        wait(lambda: len(calls) >= 2, "the rebuild that raises")
        assert thread.is_alive() and "Every reference kind" in served()
        page.write_text(page.read_text() + "\nsecond edit\n")
        wait(lambda: "second edit" in served(), "the rebuild after the crash")
    finally:
        stop.set()
        thread.join(timeout=10)
    out = capsys.readouterr().out
    assert "error: serve: internal error: RuntimeError: boom" in out


_MEMORY = """
import sys
sys.path.insert(0, {repo!r})
from pathlib import Path
from site_src.resolve import Resolver


def peak_kb():
    # VmHWM belongs to this process image (ru_maxrss would carry the forking parent's peak over exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])


r = Resolver(Path({root!r}))
r.resolve("data/rows.jsonl | count")            # imports and caches warmed up
base = peak_kb()
mean = r.resolve("data/big.jsonl | where dimension == safety | mean margin").value
count = r.resolve("data/big.jsonl | group dimension | count").value
print(peak_kb() - base, mean, count["safety"])
"""


def test_jsonl_aggregates_stream(site):
    """A 40 MB JSONL file: an aggregate over it needs far less memory than the file."""
    row = '{"dimension": "%s", "pair_id": "p%d", "margin": 0.5, "pad": "%s"}\n'
    with open(site / "data/big.jsonl", "w") as handle:
        for i in range(200_000):
            handle.write(row % ("safety" if i % 2 else "help", i, "x" * 120))
    size = (site / "data/big.jsonl").stat().st_size
    assert size > 35e6
    from generator_helpers import git
    git(site, "add", "-A")
    done = subprocess.run([sys.executable, "-c", _MEMORY.format(repo=str(REPO), root=str(site))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    grown_kb, mean, count = done.stdout.split()
    assert float(mean) == 0.5 and count == "100000"
    assert int(grown_kb) * 1024 < size / 2, f"grew {int(grown_kb) / 1024:.0f} MB for a {size / 1e6:.0f} MB file"
