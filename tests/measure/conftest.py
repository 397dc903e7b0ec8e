"""Fixtures for the measurement tests: a tiny random-weight Llama reward model saved to disk and
loaded by path, through the same code path as any Hugging Face model."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from measure import numerics

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
numerics.set_environment()  # the tests run in the mode every measurement runs in, as `python -m measure` does

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
ORGANISM = REPO / "models" / "organism"


def make_tiny(folder: Path, seed: int = 0, layers: int = 2, nan: bool = False) -> Path:
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from measure.studies.organism import data as od
    from measure.models.wordtok import SPECIALS, save_word_tokenizer

    words = list(SPECIALS) + od.vocabulary()
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=48,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32, num_labels=1, pad_token_id=0)
    model = LlamaForSequenceClassification(config)
    with torch.no_grad():  # random init gives near-zero scores; a larger score row makes margins visible
        model.score.weight.mul_(20)
        if nan:
            model.model.layers[0].mlp.down_proj.weight[0, 0] = float("nan")
    model.save_pretrained(folder)
    save_word_tokenizer(words, folder)
    return folder


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="session")
def tiny_pairs(tmp_path_factory) -> Path:
    """Two dimensions, three seeds each with one mutation: 12 pairs."""
    from measure.studies.organism import data as od
    from measure.runner.jsonio import jsonl_text

    rows = [r for r in od.study_pairs(seed=7, seeds_per_dimension=3, mutations=1)
            if r["dimension"] in ("politeness", "topic")]
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text(jsonl_text(rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def adapter(tiny_dir):
    from measure.models.adapter import load
    torch.set_num_threads(1)
    return load(str(tiny_dir))


@pytest.fixture(scope="session")
def pair_batch(adapter, tiny_pairs):
    from measure.runner.jsonio import read_jsonl
    pairs = read_jsonl(tiny_pairs)
    seqs = []
    for p in pairs:
        seqs += [adapter.encode(p["prompt"], p["chosen"]), adapter.encode(p["prompt"], p["rejected"])]
    batch = adapter.batch(seqs)
    return pairs, batch, adapter.clean_run(batch)


@pytest.fixture(scope="session")
def tiny_factory():
    """make_tiny, for tests that need a model of their own (e.g. one with a NaN weight)."""
    return make_tiny
