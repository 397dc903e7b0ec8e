"""Hostile input to the measurement command line (issue 18 cases 1, 2, 10, 11, 16): every bad
option or file is refused in one line with exit status 2, and nothing the tool did not make is
ever deleted or overwritten."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from measure.__main__ import main

REPO = Path(__file__).resolve().parents[2]
GOOD = {"dimension": "topic", "pair_id": "p1", "seed_id": "s1", "prompt": "tell me about the rain",
        "chosen": "the rain", "rejected": "the bread"}


def _one_line(capsys, argv) -> str:
    """Run the command line; it must exit 2 with one line on stderr."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


def _run(tiny_dir, tmp_path, *extra) -> list[str]:
    return ["run", "--model", str(tiny_dir), "--runs-dir", str(tmp_path / "runs"), "--no-progress", *extra]


# ----- case 1: --out that is not a bundle ------------------------------------------------------
def _a_repository(folder: Path) -> dict[str, bytes]:
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / ".gitignore").write_text(".venv/\n")
    (folder / "README.md").write_text("# my project\n")
    (folder / "config.json").write_text('{"mine": true}\n')  # a name `measure train` writes
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_out_that_is_not_a_bundle_is_refused_and_left_alone(capsys, tiny_dir, tiny_pairs, tmp_path):
    repo = tmp_path / "repo"
    before = _a_repository(repo)
    err = _one_line(capsys, _run(tiny_dir, tmp_path, "--pairs", str(tiny_pairs), "--out", str(repo)))
    assert "not a bundle this tool wrote" in err
    assert {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before
    assert not list(tmp_path.glob(".repo.staging-*"))


def test_out_that_is_a_file_or_a_link_is_refused(capsys, tiny_dir, tiny_pairs, tmp_path):
    (tmp_path / "file").write_text("keep me\n")
    assert "is a file" in _one_line(capsys, _run(tiny_dir, tmp_path, "--pairs", str(tiny_pairs),
                                                 "--out", str(tmp_path / "file")))
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    err = _one_line(capsys, _run(tiny_dir, tmp_path, "--pairs", str(tiny_pairs), "--out", str(tmp_path / "link")))
    assert "symbolic link" in err
    assert (tmp_path / "file").read_text() == "keep me\n"


def test_a_rerun_into_its_bundle_keeps_every_file_it_does_not_write(tiny_dir, tiny_pairs, tmp_path):
    out = tmp_path / "bundle"
    argv = _run(tiny_dir, tmp_path, "--pairs", str(tiny_pairs), "--out", str(out), "--study", "tiny")
    assert main(argv) == 0
    (out / ".notes").write_text("dot-files too\n")
    (out / "CORRECTIONS.md").write_text("# Corrections\n")
    (out / "extra").mkdir()
    (out / "extra" / "a.txt").write_text("a\n")
    assert main(argv) == 0
    assert (out / ".notes").read_text() == "dot-files too\n"
    assert (out / "CORRECTIONS.md").read_text() == "# Corrections\n"
    assert (out / "extra" / "a.txt").read_text() == "a\n"


def test_train_out_that_is_not_a_trained_model_is_refused_and_left_alone(capsys, tmp_path):
    before = _a_repository(tmp_path / "repo")
    err = _one_line(capsys, ["train", "--out", str(tmp_path / "repo"), "--epochs", "1"])
    assert "not a model this command trained" in err
    repo = tmp_path / "repo"
    assert {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before


# ----- case 2: a study name that is a path ----------------------------------------------------
@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", ".hidden", "Organism", "", "-x", "a" * 65])
def test_a_study_name_that_is_not_a_plain_name_is_refused(capsys, tiny_dir, tiny_pairs, tmp_path, name):
    # --out and --runs-dir inside tmp_path: code that took the name would write there, never here
    err = _one_line(capsys, _run(tiny_dir, tmp_path, "--pairs", str(tiny_pairs), "--out", str(tmp_path / "b"),
                                 f"--study={name}"))
    assert "--study" in err and "study name" in err


def test_the_study_config_refuses_a_path_as_a_study_name():
    from measure.errors import MeasureError
    from measure.runner.config import StudyConfig
    with pytest.raises(MeasureError, match="study name"):
        StudyConfig(study="..")


# ----- case 10: pairs files -------------------------------------------------------------------
def _pairs_file(tmp_path, raw: bytes) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + raw)
    return path


@pytest.mark.parametrize("raw,why", [
    (b'{"dimension": "topic\xff"}\n', "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested more than 2 levels"),
    (b'{"a": {"b": {"c": 1}}}\n', "nested more than 2 levels"),
    (b'{"dimension": NaN}\n', "not valid JSON"),
    (b'{"dimension": Infinity}\n', "not valid JSON"),
    (b'"just a string"\n', "row is not a JSON object"),
])
def test_a_bad_pairs_line_is_refused_naming_its_line(capsys, tiny_dir, tmp_path, raw, why):
    path = _pairs_file(tmp_path, raw)
    err = _one_line(capsys, _run(tiny_dir, tmp_path, "--pairs", str(path), "--out", str(tmp_path / "b")))
    assert f"{path}:2: " in err and why in err


def test_an_overlong_pairs_line_is_refused_without_reading_it_whole(tmp_path):
    """A 64 MiB line: refused at line 2 by a child whose peak memory stays far below the line."""
    path = tmp_path / "pairs.jsonl"
    with open(path, "wb") as handle:
        handle.write(json.dumps(GOOD).encode() + b"\n" + b'{"prompt": "' + b"a" * (64 << 20) + b'"}\n')
    # VmHWM: this process's peak resident memory (ru_maxrss would include the parent's, kept across exec)
    code = ("import re, sys\nfrom measure.errors import MeasureError\n"
            "from measure.runner.pairs import read_pairs\n"
            "try:\n    read_pairs(sys.argv[1])\nexcept MeasureError as exc:\n    print(exc)\n"
            "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    message, peak_kib = done.stdout.strip().splitlines()
    assert message == f"{path}:2: line over 1 MiB"
    assert int(peak_kib) < 60 << 10, f"peak {int(peak_kib) >> 10} MiB for a 64 MiB line"


# ----- case 11: options checked at parse time ------------------------------------------------
PLAN = ["plan", "--model", "organism", "--pairs", "8"]


@pytest.mark.parametrize("extra,why", [
    (["--gpu-tflops", "0"], "--gpu-tflops 0: must be above 0"),
    (["--efficiency", "0"], "--efficiency 0: must be above 0 and at most 1"),
    (["--efficiency", "1.5"], "--efficiency 1.5: must be above 0 and at most 1"),
    (["--threads", "0"], "--threads 0: must be a whole number of at least 1"),
    (["--gpu-memory-gib", "-1"], "--gpu-memory-gib -1: must be above 0"),
    (["--gpu-tflops", "nan"], "--gpu-tflops nan: must be a finite number"),
    (["--gpus", "-1"], "--gpus -1: must be a whole number of at least 0"),
    (["--seq-len", "0"], "--seq-len 0: must be a whole number of at least 1"),
    (["--json", "/"], "--json /: is a folder"),
    (["--json", "{tmp}/missing/plan.json"], "does not exist"),
    (["--dtype", "float8"], "--dtype invalid choice"),
])
def test_plan_options_are_checked_when_parsed(capsys, tmp_path, extra, why):
    assert why in _one_line(capsys, PLAN + [e.replace("{tmp}", str(tmp_path)) for e in extra])


def test_plan_takes_the_organism_by_name_like_run(capsys, tmp_path):
    # a short width: the plan measures this CPU's rate on one shard of it (the default, 256
    # tokens in bfloat16, made this the slowest test of the file) and the shape is the same
    assert main(PLAN + ["--seq-len", "16", "--json", str(tmp_path / "plan.json")]) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["shape"]["layers"] == 4 and plan["time"]["source"] == "cpu-measured"
    capsys.readouterr()


@pytest.mark.parametrize("extra,why", [
    (["--threads", "0"], "--threads 0: must be a whole number of at least 1"),
    (["--seed", "-1"], "--seed -1: must be a whole number from 0"),
    (["--seed", str(2 ** 64)], "must be a whole number from 0"),
    (["--objective", "-1"], "--objective -1: must be a whole number of at least 0"),
    (["--device", "cuda:x"], "not a device"),
    (["--dtype", "int8"], "--dtype invalid choice"),
    (["--dimensions", "topic,,hazard"], "an empty name"),
    (["--pairs", "/"], "--pairs /: is a folder"),
    (["--pairs", "/no/such/pairs.jsonl"], "no such file"),
    (["--key", "/dev/null/x"], "no such file"),
    (["--ray-cpus", "0"], "--ray-cpus 0: must be a whole number of at least 1"),
    (["--threads", "100000"], "--threads 100000: this machine has"),
    (["--max-pairs", "x"], "--max-pairs x: not a whole number"),
])
def test_run_options_are_checked_when_parsed(capsys, tiny_dir, tmp_path, extra, why):
    assert why in _one_line(capsys, _run(tiny_dir, tmp_path, "--out", str(tmp_path / "b"), *extra))


def test_runs_dir_that_is_a_file_is_refused(capsys, tiny_dir, tmp_path):
    (tmp_path / "file").write_text("x\n")
    err = _one_line(capsys, ["run", "--model", str(tiny_dir), "--out", str(tmp_path / "b"),
                             "--runs-dir", str(tmp_path / "file")])
    assert "is a file, not a folder" in err


def test_pickled_weights_are_refused_in_one_line(capsys, tiny_dir, tiny_pairs, tmp_path):
    folder = tmp_path / "pickled"
    folder.mkdir()
    for f in tiny_dir.iterdir():
        if f.suffix != ".safetensors":
            (folder / f.name).write_bytes(f.read_bytes())
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04\x95 not really a pickle")
    err = _one_line(capsys, ["run", "--model", str(folder), "--pairs", str(tiny_pairs),
                             "--out", str(tmp_path / "b"), "--runs-dir", str(tmp_path / "runs")])
    assert f"{folder / 'pytorch_model.bin'}: pickled weights are never loaded" in err


@pytest.mark.parametrize("name,raw,why", [
    ("config.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ("config.json", b'{"model_type": "llama\xff"}', ":1: the model config is not UTF-8"),
    ("config.json", b"[1, 2]", "the model config is not a JSON object"),
    ("training.json", b'{"heldout_accuracy": "all of it"}', "heldout_accuracy must map dimensions to numbers"),
])
def test_a_hostile_model_folder_file_is_refused_in_one_line(capsys, tiny_dir, tiny_pairs, tmp_path, name, raw, why):
    folder = tmp_path / "model"
    folder.mkdir()
    for f in tiny_dir.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / name).write_bytes(raw)
    err = _one_line(capsys, ["run", "--model", str(folder), "--pairs", str(tiny_pairs),
                             "--out", str(tmp_path / "b"), "--runs-dir", str(tmp_path / "runs")])
    assert why in err


def test_weights_that_do_not_load_are_refused_in_one_line(capsys, tiny_dir, tiny_pairs, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    for f in tiny_dir.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / "model.safetensors").write_bytes(b"\xff" * 1000)
    err = _one_line(capsys, ["run", "--model", str(folder), "--pairs", str(tiny_pairs),
                             "--out", str(tmp_path / "b"), "--runs-dir", str(tmp_path / "runs")])
    assert f"{folder}: the model's weights do not load" in err


@pytest.mark.parametrize("raw,why", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"universe": "x", "dimensions": {"topic": {"components": "mlp_L0"}}}', "'components' list"),
    (b'{"dimensions": {}}', "'universe' text"),
    (b"\xff", "not UTF-8"),
])
def test_a_hostile_key_file_is_refused_in_one_line(capsys, tiny_dir, tiny_pairs, tmp_path, raw, why):
    key = tmp_path / "key.json"
    key.write_bytes(raw)
    err = _one_line(capsys, _run(tiny_dir, tmp_path, "--pairs", str(tiny_pairs), "--key", str(key),
                                 "--out", str(tmp_path / "b")))
    assert f"{key}" in err and why in err


# ----- case 16: torch.load, and the torch floor -----------------------------------------------
def test_every_torch_load_in_measure_asks_for_weights_only():
    calls = []
    for path in (REPO / "measure").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.load":
                keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
                calls.append((path.name, node.lineno, keywords.get("weights_only")))
    assert calls, "no torch.load found: the test lost its subject"
    assert [c for c in calls if c[2] != "True"] == []


def test_the_torch_requirement_starts_where_weights_only_is_the_default():
    extra = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    torch_req = next(r for r in extra["measure"] if r.startswith("torch"))
    floor = tuple(int(x) for x in re.search(r">=\s*([0-9.]+)", torch_req).group(1).split("."))
    assert floor >= (2, 6), torch_req


def test_a_stats_file_that_is_not_ours_is_refused_and_runs_no_code(tiny_dir, tiny_pairs, tmp_path):
    """A `stats.pt` planted in the shard folder, pickling a call to os.system: refused, not run."""
    from measure.errors import MeasureError
    from measure.runner.config import StudyConfig
    from measure.runner.study import measure_shards, plan_study

    plan = plan_study(StudyConfig(model=str(tiny_dir), study="tiny", pairs_file=tiny_pairs, progress=False,
                                  out=tmp_path / "b", runs_dir=tmp_path / "runs"))
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    import torch
    plan.stats_path.parent.mkdir(parents=True)
    torch.save({"mean": Payload()}, plan.stats_path)
    with pytest.raises(MeasureError, match="stats.pt: not a statistics file this tool wrote"):
        measure_shards(plan)
    assert not marker.exists()


# ----- issue 28 item 5: the portable claim only for a run made in the portable mode ----------
def test_a_run_outside_the_portable_mode_says_so_when_it_starts_and_in_its_readme(capsys, tiny_dir, tiny_pairs,
                                                                                   tmp_path):
    import torch

    from bundle_kit import contract
    from measure.runner.readme import reproducibility

    out = tmp_path / "bundle"
    try:
        code = main(_run(tiny_dir, tmp_path, "--pairs", str(tiny_pairs), "--out", str(out), "--study", "tiny",
                         "--threads", "2"))
    finally:
        torch.set_num_threads(1)  # the rest of the session runs in the mode
    err = capsys.readouterr().err
    assert code == 0, err
    assert "warning: this run is outside the portable numerics mode (2 threads)" in err
    readme = (out / contract.README).read_text(encoding="utf-8")
    manifest = json.loads((out / contract.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["numerics"]["portable"] is False
    assert "made outside the portable numerics mode (2 threads)" in readme
    assert "whatever vector extensions the CPU has" not in readme and "one thread)" not in readme
    portable = dict(manifest["numerics"], threads=1, portable=True)
    assert "whatever vector extensions the CPU has" in reproducibility(portable)  # the claim, where it holds
    assert "device cuda" in reproducibility(portable, "cuda")  # a GPU run never makes the CPU claim


# ----- issue 28 item 10: an output folder that cannot be written, before anything loads ------
@pytest.fixture
def nothing_loads(monkeypatch):
    """Loading a model or training one fails the test: the refusal must come first."""
    def loaded(*args, **kwargs):
        raise AssertionError("a model was loaded or trained before the refusal")
    monkeypatch.setattr("measure.runner.study.load", loaded)
    monkeypatch.setattr("measure.studies.organism.train.train", loaded)


@pytest.mark.parametrize("argv,option", [
    (["run", "--out", "/proc/x"], "--out /proc/x"),
    (["run", "--out", "/proc/x/y/z"], "--out /proc/x/y/z"),
    (["run", "--runs-dir", "/proc"], "--runs-dir /proc"),
    (["train", "--out", "/proc/x", "--epochs", "1"], "--out /proc/x"),
])
def test_an_output_folder_that_cannot_be_written_is_refused_before_anything_loads(
        capsys, tiny_dir, tiny_pairs, tmp_path, nothing_loads, argv, option):
    if argv[0] == "run":
        defaults = {"--out": str(tmp_path / "b"), "--runs-dir": str(tmp_path / "runs")}
        defaults.update(dict(zip(argv[1::2], argv[2::2])))
        argv = ["run", "--model", str(tiny_dir), "--pairs", str(tiny_pairs), "--no-progress",
                *[x for item in defaults.items() for x in item]]
    err = _one_line(capsys, argv)
    assert err.startswith(f"error: {option}: cannot be written") and "/proc" in err
    assert not list(Path("/proc").glob(".measure-probe-*")) and not list(tmp_path.glob(".measure-probe-*"))


def test_the_write_check_leaves_nothing_behind(tmp_path):
    from measure.runner.preflight import check_writable

    check_writable(tmp_path / "new" / "deeper", "--out")
    check_writable(tmp_path, "--out", beside=True)
    assert list(tmp_path.iterdir()) == []  # nothing made, the probe removed


# ----- issue 28 item 12: the measure options, at parse time ----------------------------------
def test_a_device_or_a_pipe_is_not_a_pairs_or_key_file(capsys, tiny_dir, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for option, value in (("--pairs", "/dev/zero"), ("--key", "/dev/null"), ("--pairs", str(fifo))):
        err = _one_line(capsys, _run(tiny_dir, tmp_path, "--out", str(tmp_path / "b"), option, value))
        assert f"{option} {value}: not a regular file" in err


@pytest.mark.parametrize("argv", [
    ["run", "--out", "{tmp}/a\nb"],
    ["run", "--runs-dir", "{tmp}/runs\rx"],
    ["run", "--pairs", "{tmp}/pairs\n.jsonl"],
    ["train", "--out", "{tmp}/m\x1bodel"],
    ["plan", "--model", "organism", "--json", "{tmp}/p\nlan.json"],
])
def test_a_control_character_in_a_path_is_refused_when_parsed(capsys, tmp_path, nothing_loads, argv):
    err = _one_line(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert "holds a control character" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["--pairs", "the model folder's", "a named model's"])
def test_an_unknown_dimension_is_refused_before_the_model_loads(capsys, tiny_dir, tiny_pairs, tmp_path,
                                                                nothing_loads, where):
    if where == "--pairs":
        argv, pairs = _run(tiny_dir, tmp_path, "--pairs", str(tiny_pairs)), tiny_pairs
    elif where == "the model folder's":
        folder = tmp_path / "model"
        folder.mkdir()
        for f in tiny_dir.iterdir():
            (folder / f.name).write_bytes(f.read_bytes())
        (folder / "pairs.jsonl").write_bytes(tiny_pairs.read_bytes())
        argv, pairs = _run(folder, tmp_path), folder / "pairs.jsonl"
    else:
        argv = ["run", "--model", "organism", "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
        pairs = REPO / "models" / "organism" / "pairs.jsonl"
    err = _one_line(capsys, argv + ["--out", str(tmp_path / "b"), "--dimensions", "topic,nosuch"])
    assert f"--dimensions: nosuch not in {pairs}" in err
