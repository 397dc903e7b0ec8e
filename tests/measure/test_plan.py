"""The plan estimator: its work count is the sweep's own count, and the command runs on a bare config."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
CONFIG_8B = REPO / "benchmarks" / "configs" / "llama-3.1-8b.json"


@pytest.mark.parametrize("heads", [True, False])
def test_work_matches_the_sweeps_counter(adapter, pair_batch, heads):
    from measure.instruments.patching import MODES, StatsAccumulator, patch_sweep
    from measure.runner.plan import Shape, shard_work, total_evals

    pairs, batch, run = pair_batch
    acc = StatsAccumulator()
    acc.add(adapter, batch, run)
    counter = {}
    patch_sweep(adapter, batch, run, acc.finish(),
                [c for c in adapter.components(heads=heads) if c != "embed"], MODES, 512, counter)
    shape = Shape.from_config(adapter.model.config.to_dict())
    planned = shard_work(shape, len(pairs), batch.ids.shape[1], patch_heads=heads, clean_passes=0)
    assert total_evals(planned["layer_evals"]) == counter["layer_evals"]


def test_params_match_a_real_model(adapter):
    from measure.runner.plan import Shape

    shape = Shape.from_config(adapter.model.config.to_dict())
    assert shape.params() == sum(p.numel() for p in adapter.model.parameters())


def test_plan_command_on_the_8b_config(tmp_path, capsys):
    from measure.__main__ import main

    out = tmp_path / "plan.json"
    assert main(["plan", "--model", str(CONFIG_8B), "--pairs", "20", "--gpus", "8",
                 "--dtype", "bfloat16", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "gpu-flop-model" in text and "head" in text
    plan = json.loads(out.read_text())
    # Llama-3.1-8B (8,030,261,248) less its LM head (128256 x 4096), plus one score row
    assert plan["params"] == 8_030_261_248 - 128256 * 4096 + 4096
    assert plan["devices"] == 8 and plan["shards"] == 3
    # 3 shards on 8 GPUs: the busiest device holds one full shard
    assert plan["time"]["busiest_device_flops"] < plan["flops_total"] / 2


def test_plan_refuses_a_config_without_layers(tmp_path, capsys):
    from measure.__main__ import main

    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hidden_size": 8, "num_attention_heads": 2}))
    assert main(["plan", "--model", str(bad), "--pairs", "4", "--gpus", "1"]) == 2
    assert "num_hidden_layers" in capsys.readouterr().err
