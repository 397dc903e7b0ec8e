"""Attribution, patching and the lens on the tiny random Llama."""
from __future__ import annotations

import torch

from measure.instruments.patching import MODES, StatsAccumulator, naive_patch, naive_sweep, patch_sweep


def _stats(adapter, batch, run):
    acc = StatsAccumulator()
    acc.add(adapter, batch, run)
    return acc.finish()


def test_attribution_sums_to_the_margin(adapter, pair_batch):
    _pairs, batch, run = pair_batch
    attr = run.attribution()
    total = sum(v for k, v in attr.items() if not k.startswith("head_"))
    assert torch.allclose(total, run.reward, atol=1e-5)
    margins = run.reward[0::2] - run.reward[1::2]
    assert torch.allclose(total[0::2] - total[1::2], margins, atol=1e-5)
    assert margins.abs().max() > 1e-3  # the test would be empty with all-zero margins


def test_patching_a_component_with_its_own_output_changes_nothing(adapter, pair_batch):
    _pairs, batch, run = pair_batch
    components = [c for c in adapter.components() if c != "embed"]
    patched = patch_sweep(adapter, batch, run, None, components, modes=("clean",))
    margins = run.reward[0::2] - run.reward[1::2]
    for (name, _mode), (value, _off) in patched.items():
        assert torch.allclose(value, margins, atol=1e-6), name


def test_sweep_agrees_with_the_naive_loop(adapter, pair_batch):
    _pairs, batch, run = pair_batch
    stats = _stats(adapter, batch, run)
    components = [c for c in adapter.components() if c != "embed"]
    fast, slow = {}, {}
    sweep = patch_sweep(adapter, batch, run, stats, components, MODES, counter=fast)
    naive = naive_sweep(adapter, batch, stats, components, MODES, counter=slow)
    moved = 0.0
    for key, value in naive.items():
        assert torch.allclose(sweep[key][0], value, atol=1e-5), key
        moved = max(moved, float((value - (run.reward[0::2] - run.reward[1::2])).abs().max()))
    assert moved > 1e-3  # patches do move margins, so agreement is not trivial
    assert fast["layer_evals"] < slow["layer_evals"]


def test_zero_ablating_every_component_leaves_embedding_and_bias(adapter, pair_batch):
    _pairs, batch, run = pair_batch
    replacements = {}
    for i in range(adapter.n_layers):
        replacements[f"attn_L{i}"] = torch.zeros_like(run.attn[i])
        replacements[f"mlp_L{i}"] = torch.zeros_like(run.mlp[i])
    rewards = naive_patch(adapter, batch, replacements)
    rows = torch.arange(batch.ids.shape[0])
    expected = adapter.reward_of(run.embed[rows, batch.score_idx])
    assert torch.allclose(rewards, expected, atol=1e-5)
    assert not torch.allclose(rewards, run.reward, atol=1e-3)


def test_lens_ends_at_the_reward(adapter, pair_batch):
    _pairs, batch, run = pair_batch
    running = run.lens()
    assert running.shape == (adapter.n_layers, batch.ids.shape[0])
    assert torch.allclose(running[-1], run.reward, atol=1e-6)


def test_swap_mode_exchanges_the_scoring_token_only(adapter, pair_batch):
    from measure.instruments.patching import replacement
    _pairs, batch, run = pair_batch
    out = replacement(batch, run.mlp[0], "swap", None)
    rows = torch.arange(batch.ids.shape[0])
    assert torch.equal(out[rows, batch.score_idx], run.mlp[0][rows ^ 1, batch.score_idx[rows ^ 1]])
    mask = torch.ones_like(out, dtype=torch.bool)
    mask[rows, batch.score_idx] = False
    assert torch.equal(out[mask], run.mlp[0][mask])
