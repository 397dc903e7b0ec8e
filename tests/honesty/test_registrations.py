"""Preregistration records: fields, the order of commits in git, the frozen bytes, the verdict."""
from __future__ import annotations

import subprocess

import pytest

from site_src.errors import Errors
from site_src.fixtures import FixtureCache
from site_src.honesty import registrations as regs
from site_src.resolve import Resolver

from .gitrepo import GOLDEN, RECORD, Repo, registered_then_measured


def _check(root):
    errors = Errors()
    resolver = Resolver(root, None, FixtureCache())
    found = regs.load_all(root, resolver, errors, refusal=resolver.files.refusal)
    return found, errors.lines()


def _line(text: str, needle: str) -> int:
    return next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)


def test_honest_order_is_verified_and_the_verdict_computed(tmp_path):
    repo = registered_then_measured(tmp_path / "r")
    [v], errors = _check(repo.root)
    assert errors == []
    assert v.verdict == regs.REFUTED  # -0.09 is not > 0.05
    assert v.value.value == -0.09 and v.value.location == "bundles/toy/golden.json:5"
    assert v.kill_value.location == "bundles/toy/golden.json:9" and not v.kill_holds
    [(commit, files)] = v.data_commits
    assert files == ("bundles/toy/README.md", "bundles/toy/golden.json")
    assert v.record_commit.sha != commit.sha and v.record_commit.date < commit.date


@pytest.mark.parametrize("prediction, kill_bound, verdict", [
    ('{op: "<", bound: 0.0}', 0.2, regs.CONFIRMED),
    ('{interval: [-0.1, -0.05]}', 0.2, regs.CONFIRMED),
    ('{op: ">=", bound: 0.0}', 0.2, regs.REFUTED),
    ('{interval: [0.0, 1.0]}', 0.2, regs.REFUTED),
    ('{op: "<", bound: 0.0}', 0.001, regs.KILLED),   # the kill criterion overrides a confirmation
    ('{op: ">", bound: 0.0}', 0.001, regs.KILLED),
])
def test_verdict_is_computed_from_the_data(tmp_path, prediction, kill_bound, verdict):
    record = RECORD.replace('{op: ">", bound: 0.05}', prediction).replace("bound: 0.2", f"bound: {kill_bound}")
    [v], errors = _check(registered_then_measured(tmp_path / "r", record).root)
    assert errors == [] and v.verdict == verdict


def test_record_edited_after_its_freeze(tmp_path):
    repo = registered_then_measured(tmp_path / "r")
    edited = RECORD.replace("bound: 0.05", "bound: -0.5")
    repo.write("registrations/toy-gap.yaml", edited)
    repo.commit("quietly move the bar", "registrations")
    found, errors = _check(repo.root)
    assert found == []
    [error] = errors
    assert error.startswith(f"registrations/toy-gap.yaml:{_line(edited, 'prediction')}: was edited after its freeze: "
                            "at its first commit ")
    assert "a registration is never edited" in error


def test_uncommitted_edit_is_caught_too(tmp_path):
    repo = registered_then_measured(tmp_path / "r")
    repo.write("registrations/toy-gap.yaml", RECORD + "# a note\n")
    _found, errors = _check(repo.root)
    assert errors[0].startswith(f"registrations/toy-gap.yaml:{len(RECORD.splitlines()) + 1}: was edited after its freeze")


def test_record_committed_after_its_data(tmp_path):
    repo = Repo(tmp_path / "r")
    repo.write_data()
    data = repo.commit("the data", "bundles")
    repo.commit("a prediction, afterwards", repo.record())
    found, errors = _check(repo.root)
    assert found == []
    [error] = errors
    assert error.startswith(f"registrations/toy-gap.yaml:{_line(RECORD, 'study:')}: is newer than its data: ")
    assert f"holds content committed in {data[:12]}" in error


def test_record_and_data_in_one_commit_is_not_before_it(tmp_path):
    repo = Repo(tmp_path / "r")
    repo.write_data()
    repo.commit("both at once", "bundles", repo.record())
    _found, errors = _check(repo.root)
    assert len(errors) == 1 and "is newer than its data" in errors[0]


def test_data_reverted_to_content_older_than_the_record(tmp_path):
    """The data existed before the record; changing it and changing it back does not launder it."""
    repo = Repo(tmp_path / "r")
    repo.write_data()
    repo.commit("the data", "bundles")
    repo.write("bundles/toy/golden.json", "{}\n")
    repo.commit("hide it", "bundles")
    repo.commit("the prediction", repo.record())
    repo.write_data()
    repo.write("bundles/toy/README.md", "The toy study, rewritten after the record.\n")
    repo.commit("the same data again", "bundles")
    _found, errors = _check(repo.root)
    assert len(errors) == 1 and "bundles/toy/golden.json holds content committed in" in errors[0]


def test_data_changed_after_the_record_still_verifies(tmp_path):
    repo = registered_then_measured(tmp_path / "r")
    repo.write_data({**GOLDEN, "key_recovery": {"gap": 0.3, "n": 240}})
    second = repo.commit("rerun", "bundles")
    [v], errors = _check(repo.root)
    assert errors == [] and v.verdict == regs.CONFIRMED
    assert [c.sha for c, _files in v.data_commits][-1] == second


def test_uncommitted_data(tmp_path):
    repo = registered_then_measured(tmp_path / "r")
    repo.write("bundles/toy/extra.jsonl", "{}\n")
    _found, errors = _check(repo.root)
    assert errors == [f"registrations/toy-gap.yaml:{_line(RECORD, 'study:')}: bundles/toy/extra.jsonl is not committed "
                      "in its current form, so the build cannot show the record came first; commit the data"]


def test_record_not_committed(tmp_path):
    repo = Repo(tmp_path / "r")
    repo.write_data()
    repo.commit("the data", "bundles")
    repo.git("add", repo.record())  # staged, so the path policy lets the build read it, but never committed
    _found, errors = _check(repo.root)
    assert errors == ["registrations/toy-gap.yaml:1: is not committed: commit the record alone, before the data it predicts"]


def test_key_path_that_does_not_resolve(tmp_path):
    record = RECORD.replace("quantity: key_recovery/gap", "quantity: key_recovery/gap_typo")
    _found, errors = _check(registered_then_measured(tmp_path / "r", record).root)
    [error] = errors
    assert error.startswith(f"registrations/toy-gap.yaml:{_line(record, 'quantity:')}: quantity 'key_recovery/gap_typo' "
                            "does not resolve in bundles/toy/golden.json")


def test_kill_key_path_that_does_not_resolve(tmp_path):
    record = RECORD.replace("key_check/worst_deviation", "key_check/missing")
    _found, errors = _check(registered_then_measured(tmp_path / "r", record).root)
    assert len(errors) == 1 and errors[0].startswith(
        f"registrations/toy-gap.yaml:{_line(record, 'key_check/missing')}: quantity 'key_check/missing' does not resolve")


def test_quantity_that_is_not_a_number(tmp_path):
    record = RECORD.replace("quantity: key_recovery/gap", "quantity: study")
    _found, errors = _check(registered_then_measured(tmp_path / "r", record).root)
    assert len(errors) == 1 and "quantity 'study' in bundles/toy/golden.json is 'toy', not a finite number" in errors[0]


@pytest.mark.parametrize("change, line_of, message", [
    (lambda t: t.replace("id: toy-gap", "id: other"), "id:", "id is 'other' but the file is toy-gap.yaml"),
    (lambda t: t.replace('op: ">", bound: 0.05', 'op: "=>", bound: 0.05'), "prediction", "prediction: op must be one of"),
    (lambda t: t.replace("bound: 0.05", "bound: high"), "prediction", "prediction: bound must be a finite number"),
    (lambda t: t.replace("{op: \">\", bound: 0.05}", "{interval: [0.2, 0.1]}"), "prediction", "interval must be [lo, hi]"),
    (lambda t: t + "verdict: confirmed\n", "verdict:", "unknown field 'verdict'"),
    (lambda t: t.replace('author: "a tester"\n', ""), "id:", "lacks 'author'"),
    (lambda t: t.replace('meaning: "the key failed its own verification"', 'note: "x"'), "note:", "kill: unknown key 'note'"),
])
def test_malformed_record_names_its_line(tmp_path, change, line_of, message):
    record = change(RECORD)
    _found, errors = _check(registered_then_measured(tmp_path / "r", record).root)
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"registrations/toy-gap.yaml:{_line(record, line_of)}: "), errors
    assert message in errors[0]


def test_shallow_clone_is_one_clear_line(tmp_path):
    repo = registered_then_measured(tmp_path / "r")
    repo.write("bundles/toy/later.md", "later\n")
    repo.commit("more", "bundles")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo.root}", str(shallow)], check=True)
    _found, errors = _check(shallow)
    assert errors == ["registrations/: this clone is shallow, so the order of commits cannot be checked; "
                      "run `git fetch --unshallow` (CI: fetch-depth 0)"]


def _history_error(root) -> str:
    # The build's path policy already refuses a folder outside git; the history check says so
    # on its own too, in one line, for any caller.
    from site_src.errors import BuildError
    from site_src.honesty.history import History
    with pytest.raises(BuildError) as caught:
        History(root).require_full_history()
    return caught.value.format()


def test_not_a_git_checkout_is_one_clear_line(tmp_path):
    repo = registered_then_measured(tmp_path / "r")
    import shutil
    shutil.rmtree(repo.root / ".git")
    message = _history_error(repo.root)
    assert message.startswith("registrations/: checking a registration needs the git history") and "\n" not in message


def test_missing_git_is_one_clear_line(tmp_path, monkeypatch):
    repo = registered_then_measured(tmp_path / "r")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert _history_error(repo.root) == "registrations/: checking a registration needs git, and git is not installed"


def test_untracked_record_is_refused(tmp_path):
    repo = registered_then_measured(tmp_path / "r")
    repo.record(RECORD.replace("toy-gap", "toy-later"), name="toy-later")
    found, errors = _check(repo.root)
    assert [v.registration.id for v in found] == ["toy-gap"]
    assert len(errors) == 1 and errors[0].startswith("registrations/toy-later.yaml: is not tracked by git")


def test_record_whose_study_has_no_data_yet_awaits_it(tmp_path):
    repo = Repo(tmp_path / "r")
    repo.commit("freeze the prediction", repo.record())
    [v], errors = _check(repo.root)
    assert errors == [] and v.awaiting and v.verdict == regs.AWAITING


def test_awaiting_record_edited_is_still_refused(tmp_path):
    repo = Repo(tmp_path / "r")
    repo.commit("freeze the prediction", repo.record())
    repo.record(RECORD.replace("bound: 0.05", "bound: 0.5"))
    _found, errors = _check(repo.root)
    assert len(errors) == 1 and "was edited after its freeze" in errors[0]


def test_data_hidden_behind_a_merge_is_seen(tmp_path):
    """Issue 18, case 4: the data committed on a side branch a month before the record, the record
    on main, the identical data on main, then a merge. git's default history simplification follows
    main alone; the full history shows the side branch's older commit."""
    repo = Repo(tmp_path / "r")
    repo.write("README.md", "A repository.\n")
    repo.commit("start", "README.md")
    repo.git("checkout", "-q", "-b", "side")
    repo.write_data()
    early = repo.commit("the data, a month before the record", "bundles")
    repo.git("checkout", "-q", "main")
    repo.commit("the prediction", repo.record())
    repo.write_data()
    repo.commit("the same data on main, after the record", "bundles")
    repo.git("merge", "-q", "--no-edit", "side")
    simplified = repo.git("log", "--format=%H", "--", "bundles/toy/golden.json").split()
    assert early not in simplified          # what the check used to read
    found, errors = _check(repo.root)
    assert found == []
    [error] = errors
    assert error.startswith(f"registrations/toy-gap.yaml:{_line(RECORD, 'study:')}: is newer than its data: ")
    assert f"holds content committed in {early[:12]}" in error
