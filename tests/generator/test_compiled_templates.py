"""Compiled templates are kept between builds (.cache/jinja/, site_src/stages/load.py
CompiledTemplates): a build compiles only the templates whose source changed, and the pages are
the same bytes either way."""
import jinja2

from generator_helpers import run, tree_digest


def _compiled(monkeypatch) -> list:
    names = []
    compile_ = jinja2.Environment.compile

    def counted(self, source, name=None, filename=None, *args, **kwargs):
        names.append(name)
        return compile_(self, source, name, filename, *args, **kwargs)
    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    return names


def test_a_second_build_compiles_only_the_templates_that_changed(site, monkeypatch):
    compiled = _compiled(monkeypatch)
    assert run(site, "--clean") == 0
    first = tree_digest(site / "public")
    assert "page.html" in compiled and "base.html" in compiled
    compiled.clear()
    assert run(site, "--clean") == 0
    assert compiled == [] and tree_digest(site / "public") == first
    base = site / "templates" / "base.html"
    base.write_text(base.read_text().replace("Skip to content", "Skip to the content"))
    assert run(site, "--clean") == 0
    assert compiled == ["base.html"]
    assert "Skip to the content" in (site / "public" / "index.html").read_text()


def test_a_damaged_cache_is_compiled_again(site, monkeypatch):
    assert run(site, "--clean") == 0
    first = tree_digest(site / "public")
    kept = sorted((site / ".cache" / "jinja").iterdir())
    assert kept
    for path in kept:
        path.write_bytes(b"j2 not a compiled template")
    compiled = _compiled(monkeypatch)
    assert run(site, "--clean") == 0
    assert "page.html" in compiled and tree_digest(site / "public") == first
