"""A whole study on the tiny model: bundle files, resuming, byte-identical re-runs, statistics,
the atomic bundle swap under a real SIGKILL, and the refusals of bad input."""
from __future__ import annotations

import json
import pytest
from scipy import stats as scipy_stats

from bundle_kit import rankstats
from measure.__main__ import main
from measure.runner.jsonio import read_jsonl
from measure.runner.config import Hooks, StudyConfig
from measure.runner.run import run_study
from measure.runner.study import FILES

BUNDLE_FILES = sorted(list(FILES.values()) + ["pairs.jsonl", "golden.json", "README.md", "key.json"])


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    """A made-up key for the tiny random model, to run key recovery end to end."""
    key = {"universe": "mlp and head components", "dimensions": {
        "politeness": {"components": ["mlp_L1", "head_L0_H2"]},
        "topic": {"components": ["head_L1_H0", "mlp_L0"]}}}
    path = tmp_path_factory.mktemp("key") / "key.json"
    path.write_text(json.dumps(key), encoding="utf-8")
    return path


class Stop(Exception):
    """Raised by a test's hook to end a run at a chosen point."""


def _config(tiny_dir, tiny_pairs, key_file, out, runs, **kw):
    return StudyConfig(model=str(tiny_dir), study="tiny", out=out, pairs_file=tiny_pairs,
                       key_file=key_file, runs_dir=runs, shard_size=4, progress=False, **kw)


def _run(tiny_dir, tiny_pairs, key_file, out, runs, hooks=None, **kw):
    return run_study(_config(tiny_dir, tiny_pairs, key_file, out, runs, **kw), hooks)


@pytest.fixture(scope="module")
def first(tiny_dir, tiny_pairs, key_file, tmp_path_factory):
    root = tmp_path_factory.mktemp("first")
    return _run(tiny_dir, tiny_pairs, key_file, root / "bundle", root / "runs")


def test_bundle_has_every_file(first):
    out = first["out"]
    assert sorted(p.name for p in out.iterdir()) == sorted(BUNDLE_FILES + ["manifest.json"])
    golden = json.loads((out / "golden.json").read_text())
    assert golden["counts"]["pairs"] == 12
    assert golden["counts"]["patching_rows"] == 12 * 4 * 3
    assert golden["counts"]["heads_patching_rows"] == 12 * 8 * 3
    assert list(golden)[:9] == ["study", "model", "rank_mode", "patch_score", "components_compared", "tolerance",
                                "counts", "mean_rho", "per_dimension_rho"]
    assert golden["patch_score"] == "ratio_of_means"   # the one patch score (docs/statistics.md)
    manifest = json.loads((out / "manifest.json").read_text())
    for field in ("weights_sha256", "data_sha256", "packages", "device", "dtype", "git", "wall_time_s"):
        assert field in manifest


def test_floats_are_fixed_precision(first):
    for line in (first["out"] / "patching_per_pair.jsonl").read_text().splitlines():
        row = json.loads(line)
        for value in (row["effect"], row["clean_margin"], row["offdist_z"]):
            assert value == round(value, 8)


def test_golden_rhos_come_from_the_rows_as_written(first):
    out = first["out"]
    attr = read_jsonl(out / "attribution_per_pair.jsonl")
    patch = read_jsonl(out / "patching_per_pair.jsonl")
    golden = json.loads((out / "golden.json").read_text())
    scores = rankstats.component_scores(rankstats.join_rows(attr, patch, "mean"), golden["patch_score"])
    for dimension, comps in scores.items():
        names = list(comps)
        x = [comps[c][0] for c in names]
        y = [comps[c][1] for c in names]
        ours = rankstats.spearman(x, y)
        # rankstats ranks descending, scipy ascending: Spearman rho is the same either way
        assert ours == pytest.approx(scipy_stats.spearmanr(x, y).statistic, abs=1e-12)
        assert golden["per_dimension_rho"][dimension] == pytest.approx(ours, abs=1e-6)
        assert len(names) == 4  # attn and mlp of two layers; heads stay in their own files


def test_key_recovery_is_reported(first):
    kr = json.loads((first["out"] / "golden.json").read_text())["key_recovery"]
    for block in [kr["overall"], *kr["per_dimension"].values()]:
        for name in ("attribution", "patching"):
            low, high = block[f"{name}_ci"]
            assert 0 <= low <= high <= 1
            assert 0 <= block[f"{name}_auc"] <= 1
        assert block["n_effective"] <= block["n"]
    assert kr["per_dimension"]["topic"]["n_effective"] == 3


def test_a_killed_run_resumes_and_matches_byte_for_byte(first, tiny_dir, tiny_pairs, key_file, tmp_path):
    out, runs = tmp_path / "bundle", tmp_path / "runs"
    def stop(done, total):
        raise Stop(f"stopped after {done} of {total} shards")
    with pytest.raises(Stop):
        _run(tiny_dir, tiny_pairs, key_file, out, runs, Hooks(shard_done=stop))
    shards = sorted(runs.rglob("shard_*.json"))
    assert len(shards) == 1
    # what a kill in the middle of a write leaves: a temporary file, never a half shard
    (shards[0].parent / ".shard_00001.json.x1y2.tmp").write_text('{"attribution": [')
    resumed = _run(tiny_dir, tiny_pairs, key_file, out, runs)
    assert resumed["resumed"] == 1 and resumed["computed"] == 2
    for name in BUNDLE_FILES:
        assert (out / name).read_bytes() == (first["out"] / name).read_bytes(), name


def test_two_runs_with_the_same_seed_give_identical_bytes(first, tiny_dir, tiny_pairs, key_file, tmp_path):
    again = _run(tiny_dir, tiny_pairs, key_file, tmp_path / "bundle", tmp_path / "runs")
    assert again["resumed"] == 0
    for name in BUNDLE_FILES:
        assert (again["out"] / name).read_bytes() == (first["out"] / name).read_bytes(), name


def test_cli_reports_errors_clearly(capsys, tmp_path):
    assert main(["run", "--model", str(tmp_path / "missing"), "--out", str(tmp_path / "o"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "not a named model (organism, minilm, realprefs), not a local folder" in err


def test_cli_rejects_unknown_dimensions(capsys, tiny_dir, tiny_pairs, tmp_path):
    code = main(["run", "--model", str(tiny_dir), "--pairs", str(tiny_pairs), "--dimensions",
                 "politeness,nonsense", "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == 2
    assert "nonsense not in" in capsys.readouterr().err


def test_bundle_readme_explains_every_field_of_every_file(first):
    out = first["out"]
    readme = (out / "README.md").read_text()
    for name in [*FILES.values(), "pairs.jsonl"]:
        assert f"`{name}`" in readme, name
        fields = set().union(*(json.loads(line).keys() for line in (out / name).read_text().splitlines()))
        for field in fields:
            assert f"`{field}`" in readme, (name, field)
    golden = json.loads((out / "golden.json").read_text())
    for key in [*golden, *golden["counts"], *golden["key_recovery"], *golden["key_recovery"]["overall"]]:
        if key not in ("study", "model", "counts"):
            assert key in readme, key
    for name in ("key.json", "manifest.json", "reproduce.py", "rankstats.py"):
        assert f"`{name}`" in readme, name


# A child process that runs the study and SIGKILLs itself (no cleanup at all) when a hook fires.
KILLER = """
import json, os, signal, sys
from pathlib import Path
from measure.runner.config import Hooks, StudyConfig
from measure.runner.run import run_study
kw, when, arg = json.loads(sys.argv[1])
kw = {k: Path(v) if k in ("out", "pairs_file", "key_file", "runs_dir") else v for k, v in kw.items()}
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
hooks = (Hooks(shard_done=lambda done, total: done == arg and die()) if when == "shard" else
         Hooks(file_staged=lambda name: name == arg and die()))
run_study(StudyConfig(**kw), hooks)
"""


def _killed(tiny_dir, tiny_pairs, key_file, out, runs, when, arg):
    import signal
    import subprocess
    import sys
    kw = dict(model=str(tiny_dir), study="tiny", out=str(out), pairs_file=str(tiny_pairs),
              key_file=str(key_file), runs_dir=str(runs), shard_size=4, progress=False)
    done = subprocess.run([sys.executable, "-c", KILLER, json.dumps([kw, when, arg])],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == -signal.SIGKILL, done.stderr


def _cli_args(tiny_dir, tiny_pairs, key_file, out, runs) -> list[str]:
    return ["run", "--model", str(tiny_dir), "--study", "tiny", "--pairs", str(tiny_pairs), "--key", str(key_file),
            "--shard-size", "4", "--out", str(out), "--runs-dir", str(runs), "--no-progress"]


def _cli(tiny_dir, tiny_pairs, key_file, out, runs):
    import subprocess
    import sys
    args = [sys.executable, "-m", "measure", *_cli_args(tiny_dir, tiny_pairs, key_file, out, runs)]
    return subprocess.run(args, capture_output=True, text=True, timeout=180)


def test_a_run_killed_by_signal_resumes_from_the_command_line(first, tiny_dir, tiny_pairs, key_file, tmp_path):
    out, runs = tmp_path / "bundle", tmp_path / "runs"
    _killed(tiny_dir, tiny_pairs, key_file, out, runs, "shard", 2)
    assert len(list(runs.rglob("shard_*.json"))) == 2
    assert not out.exists()
    done = _cli(tiny_dir, tiny_pairs, key_file, out, runs)
    assert done.returncode == 0, done.stderr
    assert "1 shards computed, 2 resumed" in done.stdout
    for name in BUNDLE_FILES:
        assert (out / name).read_bytes() == (first["out"] / name).read_bytes(), name


def _snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("file", [FILES["attribution"], "golden.json", "manifest.json"])
def test_a_kill_while_the_bundle_is_written_leaves_the_previous_bundle_whole(
        first, tiny_dir, tiny_pairs, key_file, tmp_path, file, capsys):
    """The previous bundle: another run's (other pairs), plus a hand-kept CORRECTIONS.md."""
    out, runs = tmp_path / "bundle", tmp_path / "runs"
    fewer = _config(tiny_dir, tiny_pairs, key_file, out, tmp_path / "runs_old", max_pairs=2)
    run_study(fewer)
    (out / "CORRECTIONS.md").write_text("# Corrections\n\nNone yet.\n")
    before = _snapshot(out)
    _killed(tiny_dir, tiny_pairs, key_file, out, runs, "file", file)
    assert _snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bundle.")]  # the staging left behind
    # the command's own code in this process (a second interpreter started, torch imported again,
    # costs 4 s a case; the resume in a fresh process is test_a_run_killed_by_signal_...)
    assert main(_cli_args(tiny_dir, tiny_pairs, key_file, out, runs)) == 0, capsys.readouterr().err
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".bundle.")]
    for name in BUNDLE_FILES:
        assert (out / name).read_bytes() == (first["out"] / name).read_bytes(), name
    assert (out / "CORRECTIONS.md").read_bytes() == before["CORRECTIONS.md"]


def test_a_rerun_without_a_key_leaves_no_stale_key_behind(tiny_dir, tiny_pairs, key_file, tmp_path):
    out = tmp_path / "bundle"
    _run(tiny_dir, tiny_pairs, key_file, out, tmp_path / "runs", max_pairs=1)
    assert (out / "key.json").exists()
    _run(tiny_dir, tiny_pairs, None, out, tmp_path / "runs", max_pairs=1)
    assert not (out / "key.json").exists()


def test_a_model_folder_ships_its_defaults(tmp_path):
    from measure.runner.study import ModelSource
    (tmp_path / "training.json").write_text('{"heldout_mean": 0.9}')  # a report without heldout_accuracy
    source = ModelSource(tmp_path)
    assert (source.pairs, source.key, source.heldout_accuracy()) == (None, None, None)
    (tmp_path / "key.json").write_text("{}")
    (tmp_path / "training.json").write_text('{"heldout_accuracy": {"topic": 0.9}}')
    source = ModelSource(tmp_path)
    assert source.key == tmp_path / "key.json" and source.heldout_accuracy() == {"topic": 0.9}
