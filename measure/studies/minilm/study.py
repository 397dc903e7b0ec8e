"""The MiniLM study (issue 21): every pair read along the head of the fold that did not train on
it, and along a random unit direction as a control; written to `bundles/minilm-balanced/`
(`python -m measure run --model minilm --study minilm-balanced`).

Per pair (480 pairs, 12 dimensions, 240 seeds, five folds by seed):

- `direction = "head"`: the fold head of the pair's dimension (`model.fold_weight[fold, k]`):
  attribution of embed, every attn and mlp block and the bias (`attribution_per_pair.jsonl`);
  block patching in `mean` and `swap` mode (`patching_per_pair.jsonl`; zero ablation is left out
  for time, and because a zeroed block output before a LayerNorm is further from anything the
  trunk has seen than a mean one); the reward lens (`lens_per_pair.jsonl`);
- `direction = "random"`: one unit direction per fold and dimension in the heads' input space,
  drawn by `random_directions` (standard normal from a generator seeded `RANDOM_SEED`, fold-major,
  each divided by its norm): attribution and mean-mode block patching
  (`random_attribution_per_pair.jsonl`, `random_patching_per_pair.jsonl`);
- the held-out margins of the heads and of the baselines (`heldout_per_pair.jsonl`,
  `heldout.heldout_rows`), from the committed features and heads.

Attention heads are not patched one by one (the bundle's size budget). The study is the common
runner's (`measure/runner/`: plan, resumable shards, Ray, the bundle's swap) with this
`Definition`: the two reads above, the held-out rows beside them, and the summary of
`summary.py`. Everything but `manifest.json` is byte-identical between runs.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from measure.runner.definition import Definition
from measure.runner.jsonio import jsonl_text, read_jsonl
from measure.runner.reads import Read
from measure.studies.minilm import heads, heldout, model as minilm
from measure.studies.minilm.data import DIMENSIONS, FOLDS, PAIRS_FILE
from measure.studies.minilm.summary import summarise

STUDY = "minilm-balanced"
HEAD_MODES = ("mean", "swap")
RANDOM_MODES = ("mean",)
RANDOM_SEED = 0
HELDOUT = "heldout_per_pair.jsonl"


def random_directions(folds: int, objectives: int, width: int, seed: int = RANDOM_SEED) -> torch.Tensor:
    """(folds, objectives, width) float32 unit vectors: standard normal draws in fold-major order
    from a generator seeded `seed`, each divided by its norm (in float64)."""
    g = torch.Generator().manual_seed(seed)
    draws = torch.randn(folds, objectives, width, generator=g, dtype=torch.float64)
    return (draws / draws.norm(dim=-1, keepdim=True)).float()


def fold_reads(model=None, pairs: list[dict] = ()) -> list[Read]:
    """The two reads: each pair's fold head (`head`) and its fold's random direction (`random`,
    bias 0: a margin does not depend on it). Without a model, their shapes only (for FILES)."""
    head = dict(name="head", modes=HEAD_MODES, lens=True, heads=False)
    random = dict(name="random", modes=RANDOM_MODES, lens=False, heads=False, prefix="random_")
    if model is None:
        return [Read(**head), Read(**random)]
    k = torch.tensor([DIMENSIONS.index(p["dimension"]) for p in pairs])
    f = torch.tensor([p["fold"] for p in pairs])
    rand = random_directions(FOLDS, len(DIMENSIONS), model.config.hidden_size)
    return [Read(**head, directions=model.fold_weight.detach()[f, k].float(),
                 biases=model.fold_bias.detach()[f, k].float()),
            Read(**random, directions=rand[f, k], biases=torch.zeros(len(pairs)))]


# Every per-pair file of the bundle, by the key its rows go under.
FILES = {**{kind: name for read in fold_reads() for kind, name in read.files().items()}, "heldout": HELDOUT}


class MiniLMStudy(Definition):
    """The MiniLM study on the common runner (`python -m measure run --model minilm --study minilm-balanced`)."""

    pairs_file = PAIRS_FILE

    def select(self, pairs: list[dict], config) -> list[dict]:
        """`--max-pairs N`: the first N rows of every dimension and fold (`--dimensions` as usual)."""
        pairs = super().select(pairs, type(config)(**{**vars(config), "max_pairs": None}))
        if config.max_pairs is None:
            return pairs
        seen: dict = {}
        keep = []
        for p in pairs:
            seen[(p["dimension"], p["fold"])] = seen.get((p["dimension"], p["fold"]), 0) + 1
            if seen[(p["dimension"], p["fold"])] <= config.max_pairs:
                keep.append(p)
        return keep

    def reads(self, adapter, pairs: list[dict], config) -> list[Read]:
        """The fold-head and random reads of the plan's pairs (`fold_reads`)."""
        return fold_reads(adapter.model, pairs)

    def identity(self, adapter, pairs: list[dict]) -> dict:
        """The heads', features' and trunk's sha256 (training.json) and the random directions' seed."""
        training = json.loads((adapter.path / minilm.REPORT_FILE).read_text(encoding="utf-8"))
        return {"heads_sha256": training["heads_sha256"], "features_sha256": training["features_sha256"],
                "trunk_sha256": training["trunk_sha256"], "random_directions_seed": RANDOM_SEED}

    def extra_files(self, plan) -> dict[str, str]:
        """The held-out margins of the heads and the baselines (`heldout.heldout_rows`), from the
        committed features and heads of every pair of the file, for the plan's pairs."""
        every = read_jsonl(plan.pairs_file)
        features = heads.load_features(every, heads.MODEL_DIR / heads.FEATURES_FILE)
        rows = {row["pair_id"]: row for row in heldout.heldout_rows(every, features, heads.load_heads())}
        return {HELDOUT: jsonl_text([rows[p["pair_id"]] for p in plan.pairs])}

    def finish(self, plan, staging: Path, written, put) -> dict:
        """golden.json and README.md (`summary.summarise`, which writes both into `staging`)."""
        return summarise(staging, plan.identity, FILES, HEAD_MODES, STUDY)


DEFINITION = MiniLMStudy()
