"""Superseded registrations: a record judged on the data of an earlier commit, and replaced, with the
record itself untouched (registrations/superseded.yaml)."""
from __future__ import annotations

import pytest

from site_src.errors import Errors
from site_src.fixtures import FixtureCache
from site_src.honesty import registrations as regs
from site_src.resolve import Resolver

from .gitrepo import GOLDEN, RECORD, Repo, registered_then_measured

REPLACEMENT = RECORD.replace("id: toy-gap", "id: toy-gap-2").replace("quantity: key_recovery/gap",
                                                                      "quantity: recovery/gap")
REDESIGNED = {"study": "toy", "recovery": {"gap": 0.2}, "key_check": {"worst_deviation": 0.01}}


def _check(root):
    errors = Errors()
    resolver = Resolver(root, None, FixtureCache())
    found = regs.load_all(root, resolver, errors, refusal=resolver.files.refusal)
    return {v.registration.id: v for v in found}, errors.lines()


def _entry(judged_at: str, *, id: str = "toy-gap", replaced_by: str | None = "toy-gap-2", extra: str = "") -> str:
    text = f"  - id: {id}\n    judged_at: {judged_at}\n    reason: >-\n      The toy study was redesigned.\n"
    return text + (f"    replaced_by: {replaced_by}\n" if replaced_by else "") + extra


def _redesigned(tmp_path) -> tuple[Repo, str]:
    """The old record judged on the first data, a new record, then the redesigned data (which the
    old record's quantity no longer names). Returns the repository and the first data's commit."""
    repo = registered_then_measured(tmp_path / "r")
    judged = repo.git("rev-parse", "HEAD").strip()
    repo.commit("a new prediction for the redesign", repo.record(REPLACEMENT, name="toy-gap-2"))
    repo.write_data(REDESIGNED)
    repo.write("bundles/toy/README.md", "The toy study, redesigned.\n")
    repo.commit("the redesigned data", "bundles")
    return repo, judged


def _supersede(repo: Repo, entries: str, commit: bool = True) -> None:
    repo.write("registrations/superseded.yaml", "superseded:\n" + entries)
    if commit:
        repo.commit("supersede", "registrations/superseded.yaml")


def test_without_an_entry_the_redesign_breaks_the_old_record(tmp_path):
    repo, _judged = _redesigned(tmp_path)
    _found, errors = _check(repo.root)
    assert len(errors) == 1 and "quantity 'key_recovery/gap' does not resolve in bundles/toy/golden.json" in errors[0]


def test_superseded_record_is_judged_on_the_commit_it_names(tmp_path):
    repo, judged = _redesigned(tmp_path)
    record_bytes = (repo.root / "registrations" / "toy-gap.yaml").read_bytes()
    _supersede(repo, _entry(judged))
    found, errors = _check(repo.root)
    assert errors == []
    old, new = found["toy-gap"], found["toy-gap-2"]
    assert old.verdict == regs.REFUTED and old.value.value == GOLDEN["key_recovery"]["gap"]
    assert old.value.location == f"{judged[:12]}:bundles/toy/golden.json:5" and old.value.href == ""
    assert old.superseded.replaced_by == "toy-gap-2" and old.superseded.line == 2
    assert not old.judges_current_data and new.judges_current_data and new.verdict == regs.CONFIRMED
    assert (repo.root / "registrations" / "toy-gap.yaml").read_bytes() == record_bytes


def test_the_record_stays_frozen(tmp_path):
    repo, judged = _redesigned(tmp_path)
    _supersede(repo, _entry(judged))
    repo.write("registrations/toy-gap.yaml", RECORD.replace("bound: 0.05", "bound: -0.5"))
    _found, errors = _check(repo.root)
    assert len(errors) == 1 and errors[0].startswith("registrations/toy-gap.yaml:6: was edited after its freeze")


def test_a_commit_not_on_heads_history_is_refused(tmp_path):
    repo, _judged = _redesigned(tmp_path)
    repo.git("checkout", "-q", "-b", "elsewhere")
    repo.write_data({**GOLDEN, "key_recovery": {"gap": 0.5, "n": 240}})
    elsewhere = repo.commit("data nobody merged", "bundles")
    repo.git("checkout", "-q", "main")
    _supersede(repo, _entry(elsewhere))
    _found, errors = _check(repo.root)
    assert errors == [f"registrations/superseded.yaml:3: judged_at {elsewhere[:12]} is not a commit of HEAD's history: "
                      "a record is judged on data this history holds"]


def test_a_commit_without_the_data_is_refused(tmp_path):
    repo, _judged = _redesigned(tmp_path)
    record_commit = repo.git("log", "--format=%H", "--", "registrations/toy-gap.yaml").split()[-1]
    _supersede(repo, _entry(record_commit))
    _found, errors = _check(repo.root)
    assert errors == [f"registrations/superseded.yaml:3: bundles/toy/golden.json is not in commit {record_commit[:12]}: "
                      "judged_at must be a commit holding the data toy-gap was judged on"]


def test_data_older_than_the_record_at_that_commit_is_refused(tmp_path):
    """The data of the judged commit existed before the record: superseding does not launder it."""
    repo = Repo(tmp_path / "r")
    repo.write_data()
    data = repo.commit("the data first", "bundles")
    repo.commit("a prediction, afterwards", repo.record())
    judged = repo.git("rev-parse", "HEAD").strip()
    repo.commit("a new prediction", repo.record(REPLACEMENT, name="toy-gap-2"))
    repo.write_data(REDESIGNED)
    repo.write("bundles/toy/README.md", "The toy study, redesigned.\n")
    repo.commit("the redesigned data", "bundles")
    _supersede(repo, _entry(judged))
    _found, errors = _check(repo.root)
    assert len(errors) == 1
    assert errors[0].startswith("registrations/toy-gap.yaml:2: is newer than its data: ")
    assert f"held at {judged[:12]} holds content committed in {data[:12]}" in errors[0]


def test_the_judged_quantity_must_resolve_there(tmp_path):
    repo, _judged = _redesigned(tmp_path)
    head = repo.git("rev-parse", "HEAD").strip()     # the redesigned data: no key_recovery/gap
    _supersede(repo, _entry(head))
    _found, errors = _check(repo.root)
    assert errors == [f"registrations/toy-gap.yaml:5: quantity 'key_recovery/gap' in {head[:12]}:bundles/toy/golden.json "
                      "is missing, not a finite number"]


@pytest.mark.parametrize("entries, message", [
    ("  - id: toy-gap\n    judged_at: abc1234\n    reason: r\n", ":3: judged_at must be a full commit id"),
    ("  - id: toy-gap\n    reason: r\n", ":2: lacks 'judged_at'"),
    ("  - id: toy-gap\n    judged_at: JUDGED\n    reason: r\n    note: n\n", ":5: unknown field 'note'"),
    ("  - id: toy-gap\n    judged_at: JUDGED\n    reason: ''\n", ":4: reason must be non-empty text"),
    ("  - id: toy-gap\n    judged_at: JUDGED\n    reason: r\n    replaced_by: toy-gap\n",
     ":5: replaced_by names the superseded record itself"),
    ("  - id: toy-gap\n    judged_at: JUDGED\n    reason: r\n  - id: toy-gap\n    judged_at: JUDGED\n    reason: r\n",
     ":5: toy-gap is listed twice (first at registrations/superseded.yaml:2)"),
    ("  - id: nobody\n    judged_at: JUDGED\n    reason: r\n", ":2: nobody is not a record under registrations/"),
    ("  - id: toy-gap\n    judged_at: JUDGED\n    reason: r\n    replaced_by: nobody\n",
     ":5: replaced_by nobody is not a record under registrations/"),
    ("  - id: ../toy-gap\n    judged_at: JUDGED\n    reason: r\n", ":2: id must be a registration id"),
    ("  - just a line\n", ":2: each entry is a mapping"),
    ("  toy-gap: JUDGED\n", ":1: superseded must be a list"),
])
def test_a_malformed_entry_names_its_line(tmp_path, entries, message):
    repo, judged = _redesigned(tmp_path)
    _supersede(repo, entries.replace("JUDGED", judged))
    _found, errors = _check(repo.root)
    assert any(e.startswith("registrations/superseded.yaml" + message) for e in errors), errors


def test_an_untracked_list_is_refused(tmp_path):
    repo, judged = _redesigned(tmp_path)
    _supersede(repo, _entry(judged), commit=False)
    _found, errors = _check(repo.root)
    assert errors[0].startswith("registrations/superseded.yaml: is not tracked by git")


def test_a_study_name_that_leaves_bundles_is_refused(tmp_path):
    record = RECORD.replace("study: toy", "study: ../toy")
    _found, errors = _check(registered_then_measured(tmp_path / "r", record).root)
    assert errors == ["registrations/toy-gap.yaml:2: study must be a bundle folder name under bundles/ "
                      "([a-z0-9][a-z0-9_-]*)"]


def test_superseded_pages_show_the_verdict_and_the_replacement(tmp_path):
    from site_src.site import collect
    from .conftest import make_study_site
    root = make_study_site(tmp_path)
    repo = Repo(root)
    record = ("id: tiny-old\nstudy: tiny\nclaim: The old design's claim.\nquantity: mean_rho\n"
              "prediction: {op: '>', bound: 0.9}\nkill: {quantity: counts/pairs, op: '<', bound: 2, "
              "meaning: too few pairs}\nrationale: A test.\nauthor: tester\n")
    repo.write("registrations/tiny-old.yaml", record)
    repo.commit("freeze", "registrations")
    repo.commit("everything else", ".")
    judged = repo.git("rev-parse", "HEAD").strip()
    repo.write("registrations/tiny-new.yaml", record.replace("tiny-old", "tiny-new").replace("old design", "redesign")
               .replace("study: tiny", "study: tiny-two"))      # awaiting its data
    repo.commit("freeze the new one", "registrations")
    with (root / "bundles" / "tiny" / "README.md").open("a") as handle:
        handle.write("\nRedesigned.\n")
    repo.write("registrations/superseded.yaml", "superseded:\n" + _entry(judged, id="tiny-old", replaced_by="tiny-new"))
    repo.commit("redesign", ".")
    result = collect(root)
    assert result.errors.lines() == []
    old = result.files["registrations/tiny-old/index.html"].decode()
    assert "<dt>superseded</dt>" in old and f"<code>{judged}</code>" in old
    assert 'Replaced by <a href="../tiny-new/">tiny-new</a>' in old
    assert 'href="../../source/registrations/superseded.yaml.html#L2"' in old
    assert f'data-source="{judged[:12]}:bundles/tiny/golden.json:' in old      # the old value's receipt
    index = result.files["registrations/index.html"].decode()
    assert f"superseded: judged at <code>{judged[:12]}</code>, replaced by" in index
    study = result.files["studies/tiny/index.html"].decode()
    assert '(superseded by <a href="../../registrations/tiny-new/">tiny-new</a>)' in study
    assert "source/registrations/superseded.yaml.html" in result.files
