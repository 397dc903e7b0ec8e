"""The adapter: the component list, its forward pass against Hugging Face's, and clear errors."""
from __future__ import annotations

import json

import pytest
import torch

from measure.models.adapter import load, parse_component
from measure.errors import MeasureError

from pathlib import Path

ORGANISM = Path(__file__).resolve().parents[2] / "models" / "organism"


def test_lists_components_in_model_order(adapter):
    comps = adapter.components()
    assert comps[0] == "embed"
    assert comps[1:7] == ["attn_L0", "head_L0_H0", "head_L0_H1", "head_L0_H2", "head_L0_H3", "mlp_L0"]
    assert comps[-1] == "mlp_L1"
    assert len(comps) == 1 + 2 * (2 + 4)
    assert adapter.components(heads=False) == ["embed", "attn_L0", "mlp_L0", "attn_L1", "mlp_L1"]
    assert parse_component("head_L1_H3") == ("head", 1, 3)


def test_reward_direction_is_the_score_row(adapter):
    assert torch.equal(adapter.w_r, adapter.model.score.weight[0])


def test_layer_by_layer_forward_matches_hugging_face(adapter, pair_batch):
    _pairs, batch, run = pair_batch
    with torch.no_grad():
        logits = adapter.model(input_ids=batch.ids).logits[:, 0]
    assert torch.allclose(run.reward, logits, atol=1e-5)


def test_heads_sum_to_their_attention_output(adapter, pair_batch):
    _pairs, batch, run = pair_batch
    rows = torch.arange(batch.ids.shape[0])
    writes = adapter.family.head_writes(1, run.heads[1][rows, batch.score_idx]).sum(1)
    assert torch.allclose(writes, run.attn[1][rows, batch.score_idx], atol=1e-5)


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(MeasureError, match="not in the local Hugging Face cache"):
        load("no-such-org/no-such-model")


def test_unknown_architecture_is_a_clear_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(MeasureError, match="architecture 'gpt2' is not supported"):
        load(str(tmp_path))


def test_folder_without_config(tmp_path):
    with pytest.raises(MeasureError, match="config.json: missing"):
        load(str(tmp_path))


@pytest.mark.parametrize("device,dtype,message", [
    ("cpu", "int3", "unknown"),
    ("cuda", "float32", "CUDA is not available"),
    ("nonsense", "float32", "not a torch device"),
])
def test_device_and_dtype_errors(tiny_dir, device, dtype, message):
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(MeasureError, match=message):
        load(str(tiny_dir), device=device, dtype=dtype)


def test_nan_output_is_a_clear_error(tmp_path, tiny_pairs, tiny_factory):
    from measure.runner.config import StudyConfig
    from measure.runner.run import run_study
    folder = tiny_factory(tmp_path / "nan_model", nan=True)
    with pytest.raises(MeasureError, match="NaN"):
        run_study(StudyConfig(model=str(folder), study="nan", out=tmp_path / "out", pairs_file=tiny_pairs,
                              runs_dir=tmp_path / "runs", progress=False, max_pairs=2))


def _hf_tokenizer(folder, chat_template):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    words = ["<pad>", "<unk>", "<s>", "user:", "assistant:", "hello", "there", "rain"]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>")
    if chat_template:
        tok.chat_template = "<s>{% for m in messages %} {{ m['role'] }}: {{ m['content'] }}{% endfor %}"
    tok.save_pretrained(folder)


@pytest.mark.parametrize("chat", [True, False])
def test_hugging_face_tokenizers_and_chat_templates(tmp_path, tiny_factory, chat):
    folder = tiny_factory(tmp_path / "model")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (folder / name).unlink()  # replaced by another ordinary Hugging Face tokenizer
    _hf_tokenizer(folder, chat)
    adapter = load(str(folder))
    ids = adapter.encode("hello rain", "there")
    assert ids == ([2, 3, 5, 7, 4, 6] if chat else [5, 7, 6])
    batch = adapter.batch([ids, ids[:-1]])
    assert batch.score_idx.tolist() == [len(ids) - 1, len(ids) - 2]


def test_a_hub_id_loads_from_an_existing_cache_without_downloading(tmp_path, tiny_factory):
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "cache" / "models--example--tiny-rm"
    tiny_factory(repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    adapter = load("example/tiny-rm", cache_dir=tmp_path / "cache")
    assert adapter.model_id == "example/tiny-rm"
    assert adapter.n_layers == 2
    with pytest.raises(MeasureError, match="not in the local Hugging Face cache"):
        load("example/other-rm", cache_dir=tmp_path / "cache")


def test_the_cache_names_what_it_holds_like_the_components(adapter, pair_batch):
    _pairs, _batch, run = pair_batch
    k = adapter.head_dim
    assert torch.equal(run["head_L1_H2"], run["heads_L1"][..., 2 * k:3 * k])
    assert run["heads_L1"] is run.heads[1] and run["attn_L0"] is run.attn[0]
    assert run["mlp_L1"] is run.mlp[1] and run["embed"] is run.embed
    for point in ("resid_pre", "resid_mid", "resid_post"):
        assert run[f"{point}_L1"] is getattr(run, point)[1]
    for bad in ("z_L0", "attn_L9", "head_L0", "mlp_Lx"):
        with pytest.raises(MeasureError, match="no cached activation"):
            run[bad]
