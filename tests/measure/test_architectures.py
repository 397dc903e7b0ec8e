"""Each family object (measure/models/families.py) on a tiny random-weight model of its architecture:
the layer-by-layer pass, the heads, attribution and the sweep against the model's own forward."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from measure.models.adapter import load
from measure.models.registry import FAMILIES
from measure.instruments.patching import MODES, StatsAccumulator, naive_sweep, patch_ladder, patch_sweep
from measure.models.wordtok import SPECIALS, save_word_tokenizer

ORGANISM = Path(__file__).resolve().parents[2] / "models" / "organism"
COMMON = dict(vocab_size=80, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              num_labels=1, pad_token_id=0)


def _config(family):
    import transformers as t
    if family == "llama":
        return t.LlamaConfig(**COMMON), t.LlamaForSequenceClassification
    if family == "mistral":
        return t.MistralConfig(**COMMON), t.MistralForSequenceClassification
    if family == "qwen2":
        return t.Qwen2Config(**COMMON), t.Qwen2ForSequenceClassification
    if family == "qwen3":
        return t.Qwen3Config(**COMMON, head_dim=8), t.Qwen3ForSequenceClassification
    if family == "gemma2":
        return (t.Gemma2Config(**COMMON, head_dim=8, sliding_window=4, query_pre_attn_scalar=8),
                t.Gemma2ForSequenceClassification)
    raise AssertionError(family)


TESTED = ["llama", "mistral", "qwen2", "qwen3", "gemma2"]
TESTED_ENCODERS = ["bert"]  # test_bert_family below


def test_every_registered_family_is_tested_here():
    assert sorted(FAMILIES) == sorted(TESTED + TESTED_ENCODERS)
    for model_type, cls in FAMILIES.items():
        assert cls.model_type == model_type


def _saved_and_loaded(model, folder):
    """The model saved with a word tokenizer of its 80-token vocabulary, loaded back by `measure`."""
    model.save_pretrained(folder)
    save_word_tokenizer(list(SPECIALS) + [f"w{i}" for i in range(76)], folder)
    return load(str(folder))


@pytest.mark.parametrize("family", TESTED)
def test_family(family, tmp_path):
    config, cls = _config(family)
    torch.manual_seed(1)
    model = cls(config)
    with torch.no_grad():
        model.score.weight.mul_(20)
    adapter = _saved_and_loaded(model, tmp_path)
    assert type(adapter.family) is FAMILIES[family]
    gen = torch.Generator().manual_seed(2)
    seqs = [torch.randint(4, 80, (int(n),), generator=gen).tolist() for n in (9, 7, 6, 8)]
    batch = adapter.batch(seqs)
    run = adapter.clean_run(batch)
    with torch.no_grad():
        hidden = adapter.base(input_ids=batch.ids).last_hidden_state
    rows = torch.arange(4)
    expected = hidden[rows, batch.score_idx] @ adapter.w_r
    assert torch.allclose(run.reward, expected, atol=1e-4)  # windows of 4 < length: masks matter
    for i in range(adapter.n_layers):  # heads add up to the attention output (Gemma2: frozen post-norm)
        heads = adapter.family.head_writes(i, run.heads[i][rows, batch.score_idx]).sum(1)
        assert torch.allclose(heads, run.attn[i][rows, batch.score_idx].float(), atol=1e-4)
    attr = run.attribution()
    total = sum(v for k, v in attr.items() if not k.startswith("head_"))
    assert torch.allclose(total, run.reward, atol=1e-4)
    acc = StatsAccumulator()
    acc.add(adapter, batch, run)
    stats = acc.finish()
    comps = [c for c in adapter.components() if c != "embed"]
    fast = patch_sweep(adapter, batch, run, stats, comps, MODES)
    slow = naive_sweep(adapter, batch, stats, comps, MODES)
    ladder = patch_ladder(adapter, batch, run, stats, comps, MODES, buckets=2)  # packed, its own attention
    for key, value in slow.items():
        assert torch.allclose(fast[key][0], value, atol=1e-4), key
        assert torch.allclose(ladder[key][0], value, atol=1e-4), key


def _tiny_bert(tmp_path):
    """A random-weight MiniLMRewardModel (BERT trunk, 3 objective heads, a gate) saved to disk."""
    import transformers as t

    from measure.models.pooled_heads import MiniLMRewardModel
    config = t.BertConfig(vocab_size=80, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                          num_attention_heads=4, max_position_embeddings=64, pad_token_id=0)
    config.objectives = ["a", "b", "c"]
    torch.manual_seed(3)
    model = MiniLMRewardModel(config)
    with torch.no_grad():
        model.heads.weight.mul_(20)
    return _saved_and_loaded(model, tmp_path)


def test_bert_family(tmp_path):
    """Post-LN encoder: padding masked both ways, the pooled read, the frozen-LayerNorm
    attribution summing to the reward, per-row directions, and the sweep against the model's
    own forward pass with hooks in all three modes (the pooled swap included)."""
    from measure.models.bert import BertFamily
    adapter = _tiny_bert(tmp_path)
    assert type(adapter.family) is BertFamily and adapter.family.residual == "post-norm"
    gen = torch.Generator().manual_seed(4)
    seqs = [torch.randint(4, 80, (int(n),), generator=gen).tolist() for n in (9, 5, 6, 8, 7, 7)]
    batch = adapter.batch(seqs)
    assert batch.read == "pooled"
    W, b = adapter.family.score.weight.detach(), adapter.family.score.bias.detach()
    rows_objective = [0, 0, 2, 2, 1, 1]
    adapter.set_directions(W[rows_objective], b[rows_objective])
    run = adapter.clean_run(batch)
    mask = (torch.arange(batch.ids.shape[1])[None, :] < torch.tensor(batch.lengths)[:, None]).long()
    with torch.no_grad():
        out = adapter.model(batch.ids, mask)["objective_rewards"]
    expected = out[torch.arange(6), rows_objective]
    assert torch.allclose(run.reward, expected, atol=1e-5)  # padding masked: lengths differ
    attr = run.attribution()
    total = sum(v for k, v in attr.items() if not k.startswith("head_"))
    assert (total - run.reward).abs().max() < 1e-4
    for i in range(adapter.n_layers):  # heads sum to the attention output less the dense bias
        dense_bias = adapter.layers[i].attention.output.dense.bias
        heads = adapter.family.head_writes(i, run.heads[i]).sum(-2)
        assert torch.allclose(heads + dense_bias, run.attn[i], atol=1e-5)
    lens = run.lens()
    assert torch.allclose(lens[-1], run.reward, atol=1e-5)
    acc = StatsAccumulator()
    acc.add(adapter, batch, run)
    stats = acc.finish()
    comps = [c for c in adapter.components() if c != "embed"]
    fast = patch_sweep(adapter, batch, run, stats, comps, MODES)
    slow = naive_sweep(adapter, batch, stats, comps, MODES)
    clean = run.reward[0::2] - run.reward[1::2]
    moved = 0
    for key, value in slow.items():
        assert (fast[key][0] - value).abs().max() < 1e-5, key
        moved += int((value - clean).abs().max() > 1e-3)
    assert moved > len(slow) // 2  # the patches do something: agreement is not vacuous


def test_pooled_swap_gives_each_response_its_partners_pooled_output():
    from measure.models.adapter import Batch
    from measure.instruments.patching import pooled_mean, replacement
    torch.manual_seed(5)
    clean = torch.randn(2, 5, 3)
    batch = Batch(torch.zeros(2, 5, dtype=torch.long), torch.tensor([4, 2]), [5, 3], "pooled")
    out = replacement(batch, clean, "swap", None)
    pooled = pooled_mean(out, batch.score_idx)
    assert torch.allclose(pooled, pooled_mean(clean, batch.score_idx).flip(0), atol=1e-6)
    assert torch.equal(out[1, 3:], clean[1, 3:])  # padding untouched


def test_no_module_outside_the_families_branches_on_the_architecture():
    import re
    for path in sorted((Path(__file__).resolve().parents[2] / "measure").rglob("*.py")):
        if path.name == "families.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\.style\b|style ==|model_type\s*==|== *\"(gemma2|llama|organism)\"", text), path.name
