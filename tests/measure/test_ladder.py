"""The opt-in ladder sweep (`instruments.patch_ladder`) gives the sweep's results and the naive
loop's, to 1e-5, in every mode, with heads, across length buckets and chunk sizes, from the
caller's clean run or from its own packed one."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("buckets,max_rows,own_clean", [(1, 512, False), (3, 40, True), (8, 4, False)])
def test_ladder_equals_sweep_and_naive(adapter, pair_batch, buckets, max_rows, own_clean):
    from measure.instruments.patching import MODES, StatsAccumulator, naive_sweep, patch_ladder, patch_sweep

    _pairs, batch, run = pair_batch
    acc = StatsAccumulator()
    acc.add(adapter, batch, run)
    stats = acc.finish()
    components = [c for c in adapter.components() if c != "embed"]
    sweep_count, ladder_count = {}, {}
    sweep = patch_sweep(adapter, batch, run, stats, components, MODES, max_rows, sweep_count)
    ladder = patch_ladder(adapter, batch, None if own_clean else run, stats, components, MODES, max_rows,
                          ladder_count, buckets=buckets)
    assert set(ladder) == set(sweep)
    assert max(float((ladder[k][0] - sweep[k][0]).abs().max()) for k in sweep) <= 1e-5
    clean_evals = batch.ids.shape[0] * adapter.n_layers if own_clean else 0
    assert ladder_count["layer_evals"] == sweep_count["layer_evals"] + clean_evals  # same work, fewer passes
    some = [c for c in components if c.endswith(("_L0", "_H1")) or c == f"mlp_L{adapter.n_layers - 1}"]
    naive = naive_sweep(adapter, batch, stats, some, MODES)
    assert max(float((ladder[k][0] - v).abs().max()) for k, v in naive.items()) <= 1e-5
    nonzero = max(float((ladder[k][0] - run.reward[0::2] + run.reward[1::2]).abs().max()) for k in ladder)
    assert nonzero > 1e-3  # the patches move the margins, so the comparison is not vacuous


def test_ladder_packed_clean_run_is_the_clean_run(adapter, pair_batch):
    """The ladder's own clean run, made packed, holds what `Adapter.clean_run` holds at every
    real token (to float rounding), and zeros at the padding."""
    from measure.instruments.patching import _Ladder

    _pairs, batch, run = pair_batch
    ladder = _Ladder(adapter.family, batch, adapter.context(batch.ids.shape[1], batch.lengths),
                     adapter.n_layers, None, 2)
    packed = ladder.clean_run(adapter, batch)
    real = torch.arange(batch.ids.shape[1])[None, :] < torch.tensor(batch.lengths)[:, None]
    for kind in ("resid_pre", "attn", "heads", "resid_mid", "mlp", "resid_post"):
        for mine, theirs in zip(getattr(packed, kind), getattr(run, kind)):
            assert torch.allclose(mine[real], theirs[real], atol=1e-5), kind
            assert not mine[~real].any(), kind
    assert torch.allclose(packed.reward, run.reward, atol=1e-5)


def test_ladder_refuses_an_unpatchable_component(adapter, pair_batch):
    from measure.errors import MeasureError
    from measure.instruments.patching import patch_ladder

    _pairs, batch, run = pair_batch
    with pytest.raises(MeasureError, match="embed"):
        patch_ladder(adapter, batch, run, None, ["embed"], ("zero",))
