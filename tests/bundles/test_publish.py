"""The partial and the publishing check: what the page prints is what the site serves."""
from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import pytest

from site_src import bundles
from site_src.tablewrap import table_wrap

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@pytest.fixture(scope="module")
def tiny() -> bundles.Bundle:
    return bundles.build_bundle(TINY, REPO)


def render(bundle, rel="../../") -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(REPO / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.globals.update(table_wrap=table_wrap)  # as site_src.stages.load.make_env does
    return env.get_template("partials/bundle.html").render(bundle=bundle, rel=rel)


class _Structure(HTMLParser):
    """Checks nesting and collects links and ids."""

    def __init__(self):
        super().__init__()
        self.stack, self.links, self.ids, self.errors = [], [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "href" in attrs:
            self.links.append(attrs["href"])
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def test_partial_is_well_formed_relative_and_complete(tiny):
    html = render(tiny)
    parser = _Structure()
    parser.feed(html)
    assert parser.errors == [] and parser.stack == []
    assert len(parser.ids) == len(set(parser.ids))
    assert all(not re.match(r"^(/|[a-z]+:)", link) for link in parser.links), parser.links
    assert "../../bundles/tiny.zip" in parser.links and "../../SHA256SUMS" in parser.links
    assert "../../source/tests/bundles/fixtures/tiny/README.md.html" in parser.links
    assert "<wbr>" in html  # hashes may wrap on narrow screens; the text is unchanged
    plain = html.replace("<wbr>", "")
    for f in tiny.files:
        assert f"../../{f.href}" in parser.links
        assert f'data-sha256-for="{f.href}">{f.sha256}<' in plain
    assert f'data-sha256-for="bundles/tiny.zip">{tiny.sha256}<' in plain
    assert tiny.commit in plain and f"{tiny.size:,} bytes" in html and "&nbsp;bytes" in html
    assert "unzip tiny.zip -d tiny &amp;&amp; python tiny/reproduce.py" in html
    assert "Python 3.10 or newer" in html and "no GPU, no model download and no network" in html
    for heading in ("Reproduce this", "Run it yourself", "Expected output"):
        assert heading in html


def test_expected_output_is_escaped_verbatim(tiny):
    html = render(tiny, rel="")
    shown = re.search(r"<samp>(.*?)</samp>", html, re.S).group(1)
    import html as html_lib
    assert html_lib.unescape(shown) == tiny.expected_output


def _publish(public: Path, bundle, html: str) -> None:
    for path, data in bundles.public_files([bundle]).items():
        (public / path).parent.mkdir(parents=True, exist_ok=True)
        (public / path).write_bytes(data)
    for f in bundle.files:  # the generator publishes the study's own files under source/
        if f.href.startswith("source/"):
            target = public / f.href
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((REPO / f.href.removeprefix("source/")).read_bytes())
    (public / "studies" / "tiny").mkdir(parents=True, exist_ok=True)
    (public / "studies" / "tiny" / "index.html").write_text(html)


def test_published_site_passes(tiny, tmp_path):
    html = render(tiny)
    _publish(tmp_path, tiny, html)
    bundles.verify_published(tmp_path, html, tiny, page="studies/tiny/index.html")
    sums = (tmp_path / "SHA256SUMS").read_text()
    assert sums == f"{hashlib.sha256((tmp_path / 'bundles/tiny.zip').read_bytes()).hexdigest()}  bundles/tiny.zip\n"


def test_served_zip_that_differs_is_refused(tiny, tmp_path):
    html = render(tiny)
    _publish(tmp_path, tiny, html)
    (tmp_path / "bundles" / "tiny.zip").write_bytes(tiny.zip_bytes + b"\0")
    with pytest.raises(bundles.PublishError, match=r"studies/tiny/index.html: prints sha256 \w+ for bundles/tiny.zip, but the served file has"):
        bundles.verify_published(tmp_path, html, tiny, page="studies/tiny/index.html")


def test_page_printing_another_hash_is_refused(tiny, tmp_path):
    html = render(tiny)
    _publish(tmp_path, tiny, html)
    wrong = html.replace("<wbr>", "").replace(tiny.sha256, "0" * 64)
    with pytest.raises(bundles.PublishError, match="studies/tiny/index.html: prints sha256 0{64} for bundles/tiny.zip"):
        bundles.verify_published(tmp_path, wrong, tiny, page="studies/tiny/index.html")


def test_served_member_that_differs_is_refused(tiny, tmp_path):
    html = render(tiny)
    _publish(tmp_path, tiny, html)
    (tmp_path / "source/tests/bundles/fixtures/tiny/golden.json").write_text("{}\n")
    with pytest.raises(bundles.PublishError, match="golden.json, but the served file has"):
        bundles.verify_published(tmp_path, html, tiny, page="p")


def test_missing_file_or_sums_is_refused(tiny, tmp_path):
    html = render(tiny)
    _publish(tmp_path, tiny, html)
    (tmp_path / "SHA256SUMS").write_text("")
    with pytest.raises(bundles.PublishError, match="p: SHA256SUMS does not list bundles/tiny.zip"):
        bundles.verify_published(tmp_path, html, tiny, page="p")
    (tmp_path / "bundles" / "tiny" / "reproduce.py").unlink()
    with pytest.raises(bundles.PublishError, match="p: prints the sha256 of bundles/tiny/reproduce.py, which the site does not serve"):
        bundles.verify_published(tmp_path, html, tiny, page="p")


def test_page_without_the_bundle_hash_is_refused(tiny, tmp_path):
    with pytest.raises(bundles.PublishError, match="p: does not print the sha256 of bundles/tiny.zip"):
        bundles.verify_published(tmp_path, "<p>nothing</p>", tiny, page="p")


def test_printed_hash_of_a_path_outside_the_site_is_refused(tiny, tmp_path):
    html = render(tiny)
    _publish(tmp_path, tiny, html)
    outside = html + f'<code data-sha256-for="/etc/hostname">{"0" * 64}</code>'
    with pytest.raises(bundles.PublishError, match="/etc/hostname, which the site does not serve"):
        bundles.verify_published(tmp_path, outside, tiny, page="p")


def test_sha256sums_checks_with_sha256sum(tiny, tmp_path):
    import shutil
    import subprocess
    if shutil.which("sha256sum") is None:
        pytest.fail("sha256sum (coreutils) is needed to check SHA256SUMS as a reader would")
    _publish(tmp_path, tiny, render(tiny))
    done = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "bundles/tiny.zip: OK\n"
