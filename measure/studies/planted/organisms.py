"""Build, check and load the planted organisms: weights rebuilt from code, never committed.

`models/planted/<family>-s<seed>/` holds what is committed of an organism: `config.json`, the
tokenizer files, `answer_key.json` (the answer key, written by the construction; not named
`key.json`, the name the common runner reads a key of its own format from), `construction.json`
(the design and the weights' sha256), `pairs.jsonl` (the study pairs: 4 twins per rule, each its
own seed, dimension `<family>-s<seed>-<rule>`) and `verify_twins.jsonl` (24 held-out twins per
rule for the key check). `model.safetensors` is rebuilt by `ensure_built` when missing, and
refused when its sha256 differs from the committed record.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from measure.errors import MeasureError
from measure.runner.config import REPO
from measure.studies.planted import data as pdata
from measure.studies.planted.design import FAMILIES, SEEDS, design, dimension_name, key_of, organism_id
from measure.studies.planted.weights import config_dict, weights

PLANTED_DIR = REPO / "models" / "planted"
ORGANISMS = tuple((family, seed) for family in FAMILIES for seed in SEEDS)
STUDY_PER_RULE = 4
VERIFY_PER_RULE = 24
ANSWER_KEY = "answer_key.json"   # an organism's key (the bundle's key.json merges all twelve)
CHAT_TEMPLATE = "<bos> {{ messages[0]['content'] }} <sep> {{ messages[1]['content'] }} <eos>"
WEIGHTS_HASH = ("sha256 over each tensor's name, shape and float32 bytes, in name order "
                "(measure.studies.planted.organisms.tensor_sha256)")


def tensor_sha256(state: dict) -> str:
    """sha256 over every tensor's name, shape and float32 bytes, in name order."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().to(torch.float32).contiguous().cpu()
        digest.update(f"{name}\0{list(t.shape)}\0".encode())
        digest.update(t.numpy().tobytes())
    return digest.hexdigest()


def tokenizer():
    """The word-level tokenizer every organism shares (a standard tokenizers WordLevel model)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(pdata.vocabulary())}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>", unk_token="<unk>", sep_token="<sep>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(family: str, seed: int):
    """(model, design): organism (family, seed) in memory, float32. The weights are Python floats
    copied into tensors: no arithmetic runs in torch, so the bytes do not depend on the CPU."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    d = design(family, seed)
    vocab = pdata.vocabulary()
    cfg = LlamaConfig(**config_dict(d, len(vocab), vocab.index("<pad>"), vocab.index("<bos>"), vocab.index("<eos>")))
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = LlamaForSequenceClassification(cfg)
    values = weights(d)
    state = model.state_dict()
    missing = sorted(set(state) - set(values))
    if missing:
        raise MeasureError(f"planted {organism_id(family, seed)}: no weights set for {', '.join(missing)}")
    with torch.no_grad():
        for name, tensor in state.items():
            tensor.copy_(torch.tensor(values[name], dtype=torch.float32).reshape(tensor.shape))
    return model.eval(), d


def organism_dir(family: str, seed: int, root: Path = PLANTED_DIR) -> Path:
    """models/planted/<family>-s<seed>/ (under `root`)."""
    return root / organism_id(family, seed)


def build(family: str, seed: int, folder: Path) -> dict:
    """Write organism (family, seed) to `folder`; returns its construction record."""
    from transformers.utils import logging as hf_logging

    from measure.runner.jsonio import json_text, jsonl_text
    from safe_io import write_atomic

    hf_logging.disable_progress_bar()
    model, d = build_model(family, seed)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    sha = tensor_sha256(model.state_dict())
    record = {"organism": organism_id(family, seed), "family": family, "seed": seed,
              "weights_sha256": sha, "weights_hash": WEIGHTS_HASH,
              "design": {k: v for k, v in d.items() if k not in ("channels", "word_values")}}
    key = key_of(family, seed, d)
    key["weights_sha256"] = sha
    write_atomic(folder / ANSWER_KEY, json_text(key))
    write_atomic(folder / "construction.json", json_text(record))
    prefix = organism_id(family, seed)
    study = pdata.twins("study", prefix, STUDY_PER_RULE, prefix)
    for row in study:  # one organism's rule is its own dimension: shallow-s0-hazard, ...
        row["dimension"] = dimension_name(family, seed, row["dimension"])
    write_atomic(folder / "pairs.jsonl", jsonl_text(study))
    write_atomic(folder / "verify_twins.jsonl",
                 jsonl_text(pdata.twins("verify", prefix, VERIFY_PER_RULE, f"{prefix}-verify")))
    return record


def ensure_built(family: str, seed: int, root: Path = PLANTED_DIR) -> Path:
    """The organism's folder, its weights rebuilt if missing and checked against the committed
    construction record's sha256."""
    import torch
    from safetensors.torch import load_file

    folder = organism_dir(family, seed, root)
    record_path = folder / "construction.json"
    expected = json.loads(record_path.read_text(encoding="utf-8"))["weights_sha256"] if record_path.exists() else None
    if not (folder / "model.safetensors").exists():
        got = build(family, seed, folder)["weights_sha256"]
    else:
        got = tensor_sha256({k: v.to(torch.float32) for k, v in load_file(folder / "model.safetensors").items()})
    if expected is not None and got != expected:
        raise MeasureError(f"{record_path}: weights_sha256 {expected[:16]}..., but the built weights hash to "
                           f"{got[:16]}...; rebuild with `python -m measure.studies.planted build`")
    return folder
