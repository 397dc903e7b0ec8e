"""The registrations' checks and verdicts are kept between builds by what they read
(site_src/honesty/verdict_cache.py): a build that changed none of it does not check them again,
and any change to what they read gives what a fresh check gives."""
from __future__ import annotations

from site_src.errors import Errors
from site_src.fixtures import FixtureCache
from site_src.honesty import Honesty
from site_src.honesty import registrations as regs
from site_src.honesty import verdict_cache
from site_src.paths import RepoFiles
from site_src.resolve import Resolver

from .gitrepo import GOLDEN, RECORD, registered_then_measured


def _honesty(root):
    errors = Errors()
    honesty = Honesty(root, errors, FixtureCache(), files=RepoFiles(root))
    return honesty.registrations, errors.lines(), dict(honesty.used)


def _fresh(root):
    errors = Errors()
    resolver = Resolver(root, None, FixtureCache(), files=RepoFiles(root))
    found = regs.load_all(root, resolver, errors, refusal=resolver.files.refusal)
    return found, errors.lines()


def _cached(root):
    errors = Errors()
    resolver = Resolver(root, None, FixtureCache(), files=RepoFiles(root))
    found = verdict_cache.load_verified(root, resolver, errors, refusal=resolver.files.refusal)
    return found, errors.lines()


def _count_checks(monkeypatch) -> list:
    checked = []
    verify = regs.verify
    monkeypatch.setattr(regs, "verify", lambda reg, *a, **k: checked.append(reg.id) or verify(reg, *a, **k))
    return checked


def test_a_second_build_reads_the_verdicts_instead_of_checking_them_again(tmp_path, monkeypatch):
    repo = registered_then_measured(tmp_path / "r")
    repo.write("content/page.md", "A page.\n")
    checked = _count_checks(monkeypatch)
    first = _honesty(repo.root)
    assert checked == ["toy-gap"] and first[1] == [] and first[0][0].verdict == "refuted"
    (repo.root / "content/page.md").write_text("A page, edited.\n")   # what an author's edit changes
    second = _honesty(repo.root)
    assert checked == ["toy-gap"], "the registrations were checked again"
    assert second == first   # the same verdicts, records and receipts, and the same fixtures cited


def test_every_input_of_the_check_makes_it_run_again(tmp_path, monkeypatch):
    repo = registered_then_measured(tmp_path / "r")
    checked = _count_checks(monkeypatch)

    def same_as_fresh(why: str):
        before = len(checked)
        assert _cached(repo.root) == _fresh(repo.root), why
        assert len(checked) == before + 2, f"{why}: the cache answered"   # the cached run and the fresh one

    same_as_fresh("first")
    repo.write("notes.txt", "unrelated\n")
    repo.commit("another commit", "notes.txt")
    same_as_fresh("a new commit (HEAD moved)")
    repo.write_data({**GOLDEN, "key_recovery": {"gap": 0.3, "n": 240}})
    same_as_fresh("golden.json edited, not committed")
    repo.commit("new data", "bundles")
    same_as_fresh("the new data committed")
    repo.write("bundles/toy/extra.json", "{}\n")
    same_as_fresh("a data file added, untracked")
    repo.record(RECORD.replace("a tester", "another tester"))
    same_as_fresh("the record edited after its freeze")
    (repo.root / "registrations/toy-gap.yaml").write_text(RECORD)
    repo.write("registrations/toy-other.yaml", RECORD.replace("id: toy-gap", "id: toy-other"))
    same_as_fresh("a record added, untracked")


def test_a_damaged_cache_only_means_checking_again(tmp_path, monkeypatch):
    repo = registered_then_measured(tmp_path / "r")
    expected = _fresh(repo.root)
    assert _cached(repo.root) == expected
    for damage in ("not json", '{"format": 1, "entries": {"x": 1}}', '{"format": 1, "entries": []}', "[]"):
        (repo.root / verdict_cache.PATH).write_text(damage)
        assert _cached(repo.root) == expected, damage
    cache = (repo.root / verdict_cache.PATH).read_text()
    key = next(iter(__import__("json").loads(cache)["entries"]))
    (repo.root / verdict_cache.PATH).write_text('{"format": 1, "entries": {"%s": {"verified": [{"@": "Nope"}], "used": []}}}' % key)
    assert _cached(repo.root) == expected
