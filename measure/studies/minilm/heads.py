"""The MiniLM heads without the trunk: the committed pooled features and the fit of every head
on them (`model.py` holds the trunk, the model class and the command). Importing this module does
not import transformers, so the heads can be refitted from the features in a few seconds."""
from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from measure.errors import MeasureError
from measure.runner.tensorfile import save_tensor_file
from measure.studies.minilm.data import DIMENSIONS, FOLDS, PAIRS_FILE
from measure.studies.minilm.fit import bt_fit

REPO = Path(__file__).resolve().parents[3]
MODEL_DIR = REPO / "models" / "minilm"
HEADS_FILE = "heads.safetensors"
FEATURES_FILE = "features.safetensors"
L2 = 0.1


def text_of(prompt: str, response: str) -> str:
    """What the trunk reads for one response (the adapter's `encode_pair` without a chat template)."""
    return prompt + "\n\n" + response


def pairs_digest(pairs: list[dict]) -> str:
    """sha256 of every text the trunk reads for these pairs, in order (stored with the features)."""
    text = "".join(text_of(p["prompt"], p[side]) + "\0" for p in pairs for side in ("chosen", "rejected"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def save_features(features: dict, pairs: list[dict], path: Path) -> None:
    """Write the pooled features ({chosen, rejected}: (rows, d)) with the digest of the pairs they
    were computed on (the header in a fixed order: `measure/runner/tensorfile.py`)."""
    save_tensor_file(features, path, metadata={"pairs_sha256": pairs_digest(pairs),
                                               "order": "rows of data/minilm/pairs.jsonl"})


def load_features(pairs: list[dict], path: Path) -> dict[str, torch.Tensor]:
    """The committed pooled features, refused (one line) when missing or computed on other pairs."""
    from safetensors import safe_open
    if not path.exists():
        raise MeasureError(f"{path}: missing; run python -m measure train --model minilm")
    with safe_open(str(path), framework="pt") as f:
        if f.metadata().get("pairs_sha256") != pairs_digest(pairs):
            raise MeasureError(f"{path}: computed for other pairs than {PAIRS_FILE.name}; "
                               "run python -m measure train --model minilm")
        return {k: f.get_tensor(k) for k in ("chosen", "rejected")}


def _scale(chosen: torch.Tensor, rejected: torch.Tensor, rows: list[int]) -> tuple[torch.Tensor, float]:
    """(mean, one overall scale) of the training responses' features, float64."""
    basis = torch.cat([chosen[rows], rejected[rows]]).double()
    mu = basis.mean(0)
    return mu, float((basis - mu).pow(2).mean().sqrt())


def fit_heads(features: dict, pairs: list[dict], train_rows: list[int]) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(W (K, d), b (K,), {dimension: Newton steps}) fitted on `train_rows`, float64, in the
    trunk's pooled space: r_k(x) = W_k . x + b_k, centred on the training responses."""
    chosen, rejected = features["chosen"].double(), features["rejected"].double()
    mu, sd = _scale(chosen, rejected, train_rows)
    diffs = (chosen - rejected) / sd
    W, b, steps = [], [], {}
    for d in DIMENSIONS:
        rows = [i for i in train_rows if pairs[i]["dimension"] == d]
        w, steps[d] = bt_fit(diffs[rows], L2)
        W.append(w / sd)
        b.append(-(w / sd) @ mu)
    return torch.stack(W), torch.stack(b), steps


def train_heads(features: dict, pairs: list[dict]) -> tuple[dict, dict]:
    """({tensor name: float32 tensor}, {fold: {dimension: Newton steps}}): the heads fitted on every
    seed, and per fold the heads fitted on the other folds."""
    every = list(range(len(pairs)))
    W, b, steps_all = fit_heads(features, pairs, every)
    fold_w, fold_b, steps = [], [], {"all": steps_all}
    for f in range(FOLDS):
        Wf, bf, steps[str(f)] = fit_heads(features, pairs, [i for i in every if pairs[i]["fold"] != f])
        fold_w.append(Wf)
        fold_b.append(bf)
    tensors = {"heads.weight": W, "heads.bias": b,
               "fold_heads.weight": torch.stack(fold_w), "fold_heads.bias": torch.stack(fold_b)}
    return {k: v.float().contiguous() for k, v in tensors.items()}, steps


def load_heads(folder: Path = MODEL_DIR) -> dict[str, torch.Tensor]:
    """The committed heads: the all-seed heads and the fold heads, as stored tensors."""
    from safetensors.torch import load_file
    return load_file(str(Path(folder) / HEADS_FILE))
