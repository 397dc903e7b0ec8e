"""What the realprefs study measures, fixed before any trained model was measured: the rules.

`study.py` (the definition), `shard.py` (one shard's work), `summary.py` and `estimate.py` read
them here. The reasons for each are in `study.py`'s docstring and docs/measure.md.

- the instrument pairs: per objective, the `INSTRUMENT_PAIRS` evaluation pairs with the smallest
  `instrument_draw` (`INSTRUMENT_RULE`);
- the modes: blocks in `BLOCK_MODES`, heads in `HEAD_MODES`;
- the resample sources (`resample_sources`, `RESAMPLE_RULE`);
- the null: `NULL_DIRECTIONS` random unit directions seeded `NULL_SEED` (`null_directions`);
- the trained blocks (`trained_blocks`), patched together.
"""
from __future__ import annotations

import hashlib
import random

import torch

from measure.errors import MeasureError
from measure.studies.realprefs import model as realprefs

STUDY = "realprefs"
INSTRUMENT_PAIRS = 500
INSTRUMENT_RULE = 'the N pairs of the objective with the smallest sha256("realprefs-instruments:" + pair_id)'
BLOCK_MODES = ("mean", "resample", "swap")
HEAD_MODES = ("mean",)
NULL_DIRECTIONS = 100
NULL_SEED = 30
RESAMPLE_RULE = ('per objective, in plan order, each sequence\'s source drawn uniformly from the other '
                 'instrument pairs\' sequences by random.Random(int.from_bytes(sha256('
                 '"realprefs-resample:<seed>:<objective>").digest()[:8], "big")): src = randrange(2n - 2), '
                 'then src + 2 if src >= 2q (q the pair\'s place)')

def instrument_draw(pair_id: str) -> str:
    """The hex digest that orders an objective's evaluation pairs for the instruments."""
    return hashlib.sha256(f"realprefs-instruments:{pair_id}".encode("utf-8")).hexdigest()


def null_directions(width: int, count: int = NULL_DIRECTIONS, seed: int = NULL_SEED) -> torch.Tensor:
    """(count, width) float32 unit vectors: standard normal draws (float64) from a generator seeded
    `seed`, each divided by its norm."""
    g = torch.Generator().manual_seed(seed)
    draws = torch.randn(count, width, generator=g, dtype=torch.float64)
    return (draws / draws.norm(dim=-1, keepdim=True)).float()


def resample_sources(pairs: list[dict], seed: int) -> torch.Tensor:
    """(P, 2) long: the plan sequence (2 * pair + side) each pair's chosen and rejected reply takes
    its output from in `resample` mode (RESAMPLE_RULE); refused for an objective of one pair."""
    out = torch.empty(len(pairs), 2, dtype=torch.long)
    for objective in dict.fromkeys(p["dimension"] for p in pairs):
        mine = [i for i, p in enumerate(pairs) if p["dimension"] == objective]
        n = len(mine)
        if n < 2:
            raise MeasureError(f"resample mode needs at least two pairs of {objective}; this plan has {n}")
        digest = hashlib.sha256(f"realprefs-resample:{seed}:{objective}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        for q, i in enumerate(mine):
            for side in (0, 1):
                src = rng.randrange(2 * n - 2)
                src += 2 if src >= 2 * q else 0
                out[i, side] = 2 * mine[src // 2] + src % 2
    return out


def trained_blocks(n_layers: int) -> list[str]:
    """The attention and MLP blocks of the trained top layers (`model.SETTINGS`)."""
    top = realprefs.SETTINGS["trained_layers"]
    return [f"{kind}_L{i}" for i in range(max(0, n_layers - top), n_layers) for kind in ("attn", "mlp")]
