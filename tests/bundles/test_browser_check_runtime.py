"""The runtime behind "Run the check here" (site_src/browser_check.py) and its place in the build:
found in node_modules/pyodide only at the version package.json pins, refused when anything there
is odd, published as a few files (no package, no page for the search index), left out with one
line of explanation when absent, and hard-linked rather than copied by an unchanged rebuild.
The check itself runs in Chromium in tests/site/test_browser_check.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest

from site_src import browser_check, bundles, reader
from site_src.site import build, collect
from site_src.tablewrap import table_wrap

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"
VERSION = "314.0.8"
STUDY = ("---\ntitle: Tiny study\nsummary: A study page.\nsubject: the tiny fixture\nquestion: Where is it?\n"
         "access: forward only\ntrust: exploratory\nclaim: observational vs causal\nbundle: tiny\n---\n"
         "## Result\n\nThe mean rho is {{ golden.json#mean_rho }}.\n")


def fake_runtime(root: Path, installed: str = VERSION, pinned: str = VERSION) -> Path:
    """package.json pinning `pinned`, and a node_modules/pyodide of version `installed` whose files
    are small stand-ins (the build copies them; it never runs them)."""
    (root / "package.json").write_text(json.dumps({"devDependencies": {"axe-core": "4.11.0", "pyodide": pinned}}))
    folder = root / "node_modules" / "pyodide"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"name": "pyodide", "version": installed}))
    for name in browser_check.FILES:
        (folder / name).write_bytes(f"stand-in for {name}\n".encode())
    (folder / "console.html").write_text("<!doctype html><title>a page the check does not need</title>")
    lock = {"info": {"arch": "wasm32", "python": "3.14.2"}, "packages": {"numpy": {"file_name": "numpy.whl"}}}
    (folder / browser_check.LOCK).write_text(json.dumps(lock))
    return folder


def test_the_pinned_runtime_is_published_as_its_few_files(tmp_path):
    fake_runtime(tmp_path)
    runtime = browser_check.find(tmp_path)
    assert runtime.present and runtime.version == VERSION and runtime.note == ""
    files = runtime.public_files()
    assert sorted(files) == sorted(f"assets/pyodide/{VERSION}/{name}" for name in (*browser_check.FILES, browser_check.LOCK))
    lock = json.loads(files[f"assets/pyodide/{VERSION}/pyodide-lock.json"])
    assert lock == {"info": {"arch": "wasm32", "python": "3.14.2"}, "packages": {}}   # no package can be asked for
    assert not any(reader.search_reads(rel) for rel in files), "Pagefind would index the runtime"
    assert runtime.size == sum(len(f"stand-in for {n}\n") for n in browser_check.FILES) + len(files[f"assets/pyodide/{VERSION}/pyodide-lock.json"])


@pytest.mark.parametrize("spoil,why", [
    (lambda root: shutil.rmtree(root / "node_modules"), "node_modules/pyodide is missing (`npm ci` installs it)"),
    (lambda root: fake_runtime(root, installed="0.29.5"),
     "node_modules/pyodide is version 0.29.5, package.json pins 314.0.8 (`npm ci` installs the pinned one)"),
    (lambda root: fake_runtime(root, pinned="^314.0.8"),
     "package.json does not pin pyodide to an exact version (found '^314.0.8')"),
    (lambda root: (root / "package.json").unlink(), "package.json is missing (No such file or directory)"),
    (lambda root: (root / "node_modules/pyodide/python_stdlib.zip").unlink(),
     "node_modules/pyodide/python_stdlib.zip is missing (No such file or directory)"),
    (lambda root: (root / "node_modules/pyodide/pyodide-lock.json").write_text('{"packages": {}}'),
     "node_modules/pyodide/pyodide-lock.json has no 'info' object"),
    (lambda root: (root / "node_modules/pyodide/pyodide-lock.json").write_text("[1]"),
     "node_modules/pyodide/pyodide-lock.json is not a JSON object"),
])
def test_an_absent_or_odd_runtime_is_left_out_with_its_reason(tmp_path, spoil, why):
    fake_runtime(tmp_path)
    spoil(tmp_path)
    runtime = browser_check.find(tmp_path)
    assert not runtime.present and runtime.public_files() == {}
    assert runtime.missing == why
    assert runtime.note == f'no "Run the check here" button: {why}'


def test_links_in_the_runtime_are_never_followed(tmp_path):
    folder = fake_runtime(tmp_path)
    elsewhere = tmp_path / "elsewhere.wasm"
    elsewhere.write_bytes(b"not the runtime")
    (folder / "pyodide.asm.wasm").unlink()
    (folder / "pyodide.asm.wasm").symlink_to(elsewhere)
    assert browser_check.find(tmp_path).missing == \
        "node_modules/pyodide/pyodide.asm.wasm is not a regular file (a link or a folder)"
    shutil.rmtree(tmp_path / "node_modules")
    other = tmp_path / "other"
    other.mkdir()
    fake_runtime(other)
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "pyodide").symlink_to(other / "node_modules" / "pyodide")
    assert browser_check.find(tmp_path).missing == "node_modules/pyodide is missing (`npm ci` installs it)"


def test_an_oversized_runtime_is_refused(tmp_path, monkeypatch):
    fake_runtime(tmp_path)
    monkeypatch.setattr(browser_check, "MAX_RUNTIME_BYTES", 50)
    assert "of runtime, over the 50 allowed" in browser_check.find(tmp_path).missing


def test_a_bundle_too_large_for_a_browser_says_so():
    assert browser_check.too_large(browser_check.MAX_BROWSER_BUNDLE_BYTES) == ""
    assert browser_check.too_large(250_000_000) == \
        "its files unpack to 250 MB, more than the 100 MB this site checks in a browser"


# ---------------------------------------------------------------- the partial

@pytest.fixture(scope="module")
def tiny() -> bundles.Bundle:
    return bundles.build_bundle(TINY, REPO)


def render(bundle, check) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(REPO / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.globals.update(table_wrap=table_wrap)
    return env.get_template("partials/bundle.html").render(bundle=bundle, rel="../../", check=check)


def test_the_partial_names_what_the_check_needs(tiny, tmp_path):
    fake_runtime(tmp_path)
    html = render(tiny, browser_check.find(tmp_path))
    assert '<div class="bundle-check" id="bundle-tiny-check" hidden' in html
    for attr in ('data-check-script="../../assets/check.js"', f'data-check-runtime="../../assets/pyodide/{VERSION}/"',
                 'data-check-zip="../../bundles/tiny.zip"', f'data-check-sha256="{tiny.sha256}"', 'data-check-name="tiny"'):
        assert attr in html, attr
    assert '<button type="button" class="check-run" aria-describedby="bundle-tiny-here-what">Run the check here</button>' in html
    assert '<p class="check-status" role="status"></p>' in html
    # the zip's size (its download's progress), the run's time limit, a Stop button for the run,
    # and a word for a reader without JavaScript
    limit = browser_check.time_limit(sum(f.size for f in tiny.files))
    assert f'data-check-zip-bytes="{tiny.size}"' in html and f'data-check-limit="{limit}"' in html
    assert f"for at most {limit} s" in html
    assert '<button type="button" class="check-stop" hidden>Stop</button>' in html
    assert re.search(r"<noscript><p class=\"bundle-check-noscript\">[^<]*needs JavaScript", html)


def test_the_time_limit_grows_with_the_bundle():
    assert browser_check.time_limit(0) == 60
    assert browser_check.time_limit(7_500_000) == 98
    assert browser_check.time_limit(browser_check.MAX_BROWSER_BUNDLE_BYTES) == 560


def test_the_partial_without_a_runtime_or_for_a_large_bundle_has_no_button(tiny, tmp_path, monkeypatch):
    assert "bundle-check" not in render(tiny, None)
    fake_runtime(tmp_path)
    monkeypatch.setattr(browser_check, "MAX_BROWSER_BUNDLE_BYTES", 1000)
    html = render(tiny, browser_check.find(tmp_path))
    assert "check-run" not in html
    assert "Not checked in the browser here: its files unpack to" in html
    assert "has no option to check part of a bundle" in html


# ---------------------------------------------------------------- the build

def study_site(tmp_path: Path) -> Path:
    """The generator tests' fixture repository, this repository's templates and the tiny study, in git."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "tests" / "generator" / "fixtures" / "repo", root)
    shutil.copytree(REPO / "templates", root / "templates")
    shutil.copytree(TINY, root / "bundles" / "tiny")
    (root / "content" / "studies").mkdir(parents=True)
    (root / "content" / "studies" / "tiny.md").write_text(STUDY, encoding="utf-8")
    (root / ".gitignore").write_text("/public\n/.public.builds/\n.cache/\nnode_modules/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


def test_a_build_without_the_runtime_has_no_button_and_says_why_once(tmp_path):
    root = study_site(tmp_path)
    fake_runtime(root)
    shutil.rmtree(root / "node_modules")   # package.json pins it, npm was never run: a build machine without npm
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    result = collect(root)
    assert result.ok, result.errors.lines()
    assert 'no "Run the check here" button: node_modules/pyodide is missing (`npm ci` installs it)' in result.note
    assert result.note.count("Run the check here") == 1
    assert "check-run" not in result.files["studies/tiny/index.html"].decode()
    assert not any(rel.startswith("assets/pyodide/") for rel in result.files)


def test_a_build_with_the_runtime_publishes_it_and_an_unchanged_rebuild_links_it(tmp_path):
    root = study_site(tmp_path)
    fake_runtime(root)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    out = root / "public"
    first = build(root, out)
    assert first.ok, first.errors.lines()
    assert "Run the check here" not in first.note
    page = (out / "studies/tiny/index.html").read_text()
    assert f'data-check-runtime="../../assets/pyodide/{VERSION}/"' in page
    wasm = out / "assets/pyodide" / VERSION / "pyodide.asm.wasm"
    assert wasm.read_bytes() == (root / "node_modules/pyodide/pyodide.asm.wasm").read_bytes()
    assert not (out / "assets/pyodide" / VERSION / "console.html").exists()
    inode = os.stat(wasm).st_ino
    assert inode != os.stat(root / "node_modules/pyodide/pyodide.asm.wasm").st_ino   # a copy, never the package's own file

    (root / "content/studies/tiny.md").write_text(STUDY + "\nAn edit.\n", encoding="utf-8")
    second = build(root, out)
    assert second.ok, second.errors.lines()
    assert os.stat(out / "assets/pyodide" / VERSION / "pyodide.asm.wasm").st_ino == inode   # linked, not copied

    # the runtime's removal is an input change: the next build leaves the button out
    shutil.rmtree(root / "node_modules")
    third = build(root, out)
    assert third.ok and "node_modules/pyodide is missing" in third.note
    assert "check-run" not in (out / "studies/tiny/index.html").read_text()
    assert not (out / "assets/pyodide").exists()
