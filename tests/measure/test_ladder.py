"""The opt-in ladder sweep (`instruments.patch_ladder`) gives the sweep's results and the naive
loop's, to 1e-5, in every mode, with heads, across length buckets and chunk sizes."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("buckets,max_rows", [(1, 512), (3, 40), (None, 24)])
def test_ladder_equals_sweep_and_naive(adapter, pair_batch, buckets, max_rows):
    from measure.instruments.patching import MODES, StatsAccumulator, naive_sweep, patch_ladder, patch_sweep

    _pairs, batch, run = pair_batch
    acc = StatsAccumulator()
    acc.add(adapter, batch, run)
    stats = acc.finish()
    components = [c for c in adapter.components() if c != "embed"]
    sweep_count, ladder_count = {}, {}
    sweep = patch_sweep(adapter, batch, run, stats, components, MODES, max_rows, sweep_count)
    ladder = patch_ladder(adapter, batch, run, stats, components, MODES, max_rows, ladder_count, buckets=buckets)
    assert set(ladder) == set(sweep)
    assert max(float((ladder[k][0] - sweep[k][0]).abs().max()) for k in sweep) <= 1e-5
    assert ladder_count["layer_evals"] == sweep_count["layer_evals"]  # same work, fewer and larger passes
    some = [c for c in components if c.endswith(("_L0", "_H1")) or c == f"mlp_L{adapter.n_layers - 1}"]
    naive = naive_sweep(adapter, batch, stats, some, MODES)
    assert max(float((ladder[k][0] - v).abs().max()) for k, v in naive.items()) <= 1e-5
    nonzero = max(float((ladder[k][0] - run.reward[0::2] + run.reward[1::2]).abs().max()) for k in ladder)
    assert nonzero > 1e-3  # the patches move the margins, so the comparison is not vacuous


def test_ladder_refuses_an_unpatchable_component(adapter, pair_batch):
    from measure.errors import MeasureError
    from measure.instruments.patching import patch_ladder

    _pairs, batch, run = pair_batch
    with pytest.raises(MeasureError, match="embed"):
        patch_ladder(adapter, batch, run, None, ["embed"], ("zero",))
