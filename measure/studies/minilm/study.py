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

Attention heads are not patched one by one (the bundle's size budget). Deterministic: one thread,
fixed order, the rounding of `measure/runner/rows.py`; everything but `manifest.json` is
byte-identical between runs.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from pathlib import Path

import torch

from safe_io import git_state, replace_dir, staging_dir, write_atomic

from measure.instruments import offdist
from measure.instruments.patching import StatsAccumulator, check_finite, patch_sweep
from measure.models.adapter import Adapter, parse_component
from measure.runner.jsonio import fixed, jsonl_text, read_jsonl
from measure.runner.rows import PLACES, _moves
from measure.runner.study import setup_determinism, versions, weights_identity
from measure.studies.minilm import heads as minilm_heads, heldout, model as minilm
from measure.studies.minilm.data import DIMENSIONS, FOLDS, PAIRS_FILE

REPO = Path(__file__).resolve().parents[3]
STUDY = "minilm-balanced"
FILES = {"attribution": "attribution_per_pair.jsonl", "patching": "patching_per_pair.jsonl",
         "lens": "lens_per_pair.jsonl", "random_attribution": "random_attribution_per_pair.jsonl",
         "random_patching": "random_patching_per_pair.jsonl", "heldout": "heldout_per_pair.jsonl"}
SHARD = 8           # pairs per batch: four seeds of one dimension
HEAD_MODES = ("mean", "swap")
RANDOM_MODES = ("mean",)
RANDOM_SEED = 0


def random_directions(folds: int, objectives: int, width: int, seed: int = RANDOM_SEED) -> torch.Tensor:
    """(folds, objectives, width) float32 unit vectors: standard normal draws in fold-major order
    from a generator seeded `seed`, each divided by its norm (in float64)."""
    g = torch.Generator().manual_seed(seed)
    draws = torch.randn(folds, objectives, width, generator=g, dtype=torch.float64)
    return (draws / draws.norm(dim=-1, keepdim=True)).float()


def reads(model, pairs: list[dict]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{direction: ((P, d) read-out direction, (P,) bias)} of every pair: its fold head, and its
    fold's random direction (bias 0: a margin does not depend on it)."""
    k = torch.tensor([DIMENSIONS.index(p["dimension"]) for p in pairs])
    f = torch.tensor([p["fold"] for p in pairs])
    rand = random_directions(FOLDS, len(DIMENSIONS), model.config.hidden_size)
    return {"head": (model.fold_weight.detach()[f, k].float(), model.fold_bias.detach()[f, k].float()),
            "random": (rand[f, k], torch.zeros(len(pairs)))}


def _encode(adapter, pairs):
    seqs = []
    for p in pairs:
        where = f"{PAIRS_FILE.name} (pair {p['pair_id']})"
        seqs += [adapter.encode(p["prompt"], p["chosen"], where), adapter.encode(p["prompt"], p["rejected"], where)]
    return seqs


def _rows(adapter, pairs, batch, direction: str, modes, lens: bool, stats, out: dict, prefix: str) -> None:
    """Measure one shard along the directions already set; append its rows to `out`."""
    run = adapter.clean_run(batch)
    check_finite(run.reward, f"clean rewards of pairs {pairs[0]['pair_id']}..{pairs[-1]['pair_id']}")
    margins = (run.reward[0::2] - run.reward[1::2]).double()
    attr = {k: v.double() for k, v in run.attribution().items()}
    blocks = [c for c in adapter.components(heads=False) if c != "embed"]
    folds = torch.tensor([stats.folds[p["seed_id"]] for p in pairs]) if stats.folds else None
    patched = patch_sweep(adapter, batch, run, stats, blocks, modes, folds=folds)
    running = run.lens().double() if lens else None
    for p, pair in enumerate(pairs):
        base = {"model": adapter.model_id, "dimension": pair["dimension"], "pair_id": pair["pair_id"],
                "seed_id": pair["seed_id"], "direction": direction}
        margin = float(margins[p])
        for name in adapter.components(heads=False) + ["bias"]:
            kind, layer, _ = parse_component(name)
            c, r = float(attr[name][2 * p]), float(attr[name][2 * p + 1])
            out[prefix + "attribution"].append(dict(base, component=name, kind=kind, layer=layer, attribution=c - r,
                                                    attr_chosen=c, attr_rejected=r, margin=margin))
        for name in blocks:
            kind, layer, _ = parse_component(name)
            for mode in modes:
                value, off = patched[(name, mode)]
                check_finite(value[p:p + 1], f"pair {pair['pair_id']}, {name} patched ({mode}, {direction})")
                effect = float(value[p]) - margin
                z = None if math.isnan(float(off[p])) else round(float(off[p]), PLACES)
                out[prefix + "patching"].append(dict(
                    base, component=name, kind=kind, layer=layer, mode=mode, clean_margin=margin,
                    patched_margin=float(value[p]), effect=effect, moves_pct=_moves(effect, margin),
                    offdist_z=z, offdist_flag=None if z is None else z > offdist.THRESHOLD))
        if lens:
            for i in range(adapter.n_layers):
                out["lens"].append(dict(base, layer=i, depth=(i + 1) / adapter.n_layers,
                                        running_margin=float(running[i, 2 * p] - running[i, 2 * p + 1])))


def measure(adapter: Adapter, pairs: list[dict], directions: dict, progress: bool = True) -> dict[str, list[dict]]:
    """Every instrument row of the pairs, along both reads."""
    from tqdm import tqdm
    seqs = _encode(adapter, pairs)
    shards = [list(range(s, min(s + SHARD, len(pairs)))) for s in range(0, len(pairs), SHARD)]
    adapter.set_directions(None)
    acc = StatsAccumulator(heads=False)  # no head is patched one by one
    for shard in tqdm(shards, desc="clean pass (means)", disable=not progress):
        batch = adapter.batch([t for i in shard for t in seqs[2 * i:2 * i + 2]])
        acc.add(adapter, batch, adapter.clean_run(batch))
    stats = acc.finish(seeds=[p["seed_id"] for p in pairs])
    out = {name: [] for name in FILES if name != "heldout"}
    for shard in tqdm(shards, desc="measuring minilm", disable=not progress):
        sp = [pairs[i] for i in shard]
        batch = adapter.batch([t for i in shard for t in seqs[2 * i:2 * i + 2]])
        rows = torch.tensor([i for i in shard for _ in (0, 1)])
        for direction, modes, prefix in (("head", HEAD_MODES, ""), ("random", RANDOM_MODES, "random_")):
            W, b = directions[direction]
            adapter.set_directions(W[rows], b[rows])
            _rows(adapter, sp, batch, direction, modes, direction == "head", stats, out, prefix)
    adapter.set_directions(None)
    return {k: fixed(v, PLACES) for k, v in out.items()}


def run(out: Path | None = None, max_pairs: int | None = None, progress: bool = True, threads: int = 1) -> dict:
    from measure.studies.minilm.summary import summarise
    started = time.time()
    head, dirty = git_state(REPO)  # before the run writes the bundle, which would make the tree look dirty
    setup_determinism(0, threads, "cpu")
    final = Path(out) if out else REPO / "bundles" / STUDY
    out = staging_dir(final)  # written in full beside the old bundle, then swapped in
    model, tokenizer = minilm.load_model()
    adapter = Adapter(model, tokenizer, "minilm", path=minilm.MODEL_DIR)
    pairs = read_jsonl(PAIRS_FILE)
    features = minilm_heads.load_features(pairs, minilm.MODEL_DIR / minilm.FEATURES_FILE)
    heads = minilm_heads.load_heads()
    held = heldout.heldout_rows(pairs, features, heads)
    if max_pairs:  # a quick look: the first `max_pairs` rows of every dimension and fold
        seen: dict = {}
        keep = []
        for i, p in enumerate(pairs):
            seen[(p["dimension"], p["fold"])] = seen.get((p["dimension"], p["fold"]), 0) + 1
            if seen[(p["dimension"], p["fold"])] <= max_pairs:
                keep.append(i)
        pairs, held = [pairs[i] for i in keep], [held[i] for i in keep]
    files = measure(adapter, pairs, reads(model, pairs), progress)
    files["heldout"] = fixed(held, PLACES)
    for name, filename in FILES.items():
        write_atomic(out / filename, jsonl_text(files[name]))
    pairs_text = jsonl_text(pairs)
    write_atomic(out / "pairs.jsonl", pairs_text)
    training = json.loads((minilm.MODEL_DIR / minilm.REPORT_FILE).read_text(encoding="utf-8"))
    identity = {"model": "minilm", **weights_identity(minilm.MODEL_DIR),
                "heads_sha256": training["heads_sha256"], "features_sha256": training["features_sha256"],
                "trunk_sha256": training["trunk_sha256"],
                "data_sha256": hashlib.sha256(pairs_text.encode()).hexdigest(), "seed": 0,
                "random_directions_seed": RANDOM_SEED, "dtype": "float32", "device_type": "cpu"}
    summary = summarise(out, identity)
    manifest = {
        "study": STUDY, **identity,
        "model_config": dict(json.loads(model.config.to_json_string(use_diff=False)), _name_or_path="minilm"),
        "data_file": str(PAIRS_FILE.relative_to(REPO)), "packages": versions(), "device": "cpu",
        "threads": threads, "git": {"commit": head, "dirty": dirty},
        "wall_time_s": round(time.time() - started, 3),
        "command": "python -m measure " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("__main__.py") else None,
    }
    write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, default=str) + "\n")
    replace_dir(out, final)
    return {"out": final, "golden": summary, "manifest": manifest}
