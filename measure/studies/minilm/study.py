"""The MiniLM study: every pair measured along its own objective direction and along the gated
aggregate, written to `bundles/minilm/` (`python -m measure run --model minilm --study minilm`).

What is measured, per pair (480 pairs, 12 dimensions, 120 seeds):

- along the pair's own objective head (`direction = "own"`): attribution of embed, every attn and
  mlp block (`attribution_per_pair.jsonl`); block patching in all three modes
  (`patching_per_pair.jsonl`); the reward lens (`lens_per_pair.jsonl`);
- on the held-out pairs only (192): mean-mode patching of every head
  (`heads_patching_per_pair.jsonl`); head attribution is not written, which keeps the bundle
  under its 20 MB limit (with it the bundle was 22.5 MB);
- along the gated aggregate (`direction = "gated"`, the gate held at its value on the clean
  prompt): attribution of the blocks, mean-mode block patching and the lens
  (`gated_attribution_per_pair.jsonl`, `gated_patching_per_pair.jsonl`, `gated_lens_per_pair.jsonl`).

Deterministic: one thread, fixed order, the rounding of `measure/runner/rows.py`; everything but
`manifest.json` is byte-identical between runs.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from bundle_kit import rankstats
from bundle_kit.contract import MODES, TOLERANCE
from safe_io import git_state, replace_dir, staging_dir, write_atomic

from measure.instruments import offdist
from measure.models.adapter import Adapter, parse_component
from measure.runner.config import REPO
from measure.instruments.patching import StatsAccumulator, check_finite, patch_sweep
from measure.runner.jsonio import fixed, json_text, jsonl_text, read_jsonl
from measure.studies.minilm.model import MODEL_DIR, load_model
from measure.studies.minilm.data import DIMENSIONS, PAIRS_FILE
from measure.runner.rows import PLACES, _moves, attribution_gap
from measure.runner.study import setup_determinism, versions, weights_identity
from measure.runner.summary import BOOTSTRAP, golden, rho_intervals

FILES = {"attribution": "attribution_per_pair.jsonl",
         "patching": "patching_per_pair.jsonl", "patching_heads": "heads_patching_per_pair.jsonl",
         "lens": "lens_per_pair.jsonl", "gated_attribution": "gated_attribution_per_pair.jsonl",
         "gated_patching": "gated_patching_per_pair.jsonl", "gated_lens": "gated_lens_per_pair.jsonl"}
SHARD = 8          # pairs per batch: two seeds of four variants, so a shard never mixes splits
HEAD_MODES = ("mean",)
GATED_MODES = ("mean",)


def _encode(adapter, pairs):
    seqs, prompts = [], []
    for p in pairs:
        where = f"{PAIRS_FILE.name} (pair {p['pair_id']})"
        seqs += [adapter.encode(p["prompt"], p["chosen"], where), adapter.encode(p["prompt"], p["rejected"], where)]
        prompts.append(list(adapter.tokenizer(p["prompt"])["input_ids"]))
    return seqs, prompts


@torch.no_grad()
def _gate(adapter, prompt_seqs):
    """(P, K) gate weights of each prompt, from a clean prompt-only pass."""
    batch = adapter.batch(prompt_seqs)
    mask = (torch.arange(batch.ids.shape[1])[None, :] < torch.tensor(batch.lengths)[:, None]).long()
    return adapter.model.gate_weights(batch.ids, mask).float()


def _rows(adapter, pairs, batch, direction, heads: bool, block_modes, head_modes, stats, out):
    """Measure one shard along the directions already set; append rows to `out`."""
    prefix = "" if direction == "own" else "gated_"
    run = adapter.clean_run(batch)
    check_finite(run.reward, f"clean rewards of pairs {pairs[0]['pair_id']}..{pairs[-1]['pair_id']}")
    margins = (run.reward[0::2] - run.reward[1::2]).double()
    attr = {k: v.double() for k, v in run.attribution().items()}
    running = run.lens().double()
    blocks = [c for c in adapter.components(heads=False) if c != "embed"]
    folds = torch.tensor([stats.folds[p["seed_id"]] for p in pairs]) if stats.folds else None
    patched = patch_sweep(adapter, batch, run, stats, blocks, block_modes, folds=folds)
    head_names = [c for c in adapter.components() if c.startswith("head_")] if heads else []
    if head_names:
        patched.update(patch_sweep(adapter, batch, run, stats, head_names, head_modes, folds=folds))
    for p, pair in enumerate(pairs):
        base = {"model": adapter.model_id, "dimension": pair["dimension"], "pair_id": pair["pair_id"],
                "seed_id": pair["seed_id"], "direction": direction}
        margin = float(margins[p])
        for name in adapter.components() + ["bias"]:
            kind, layer, _ = parse_component(name)
            if kind == "head":  # head attribution is not written (the bundle's size limit)
                continue
            c, r = float(attr[name][2 * p]), float(attr[name][2 * p + 1])
            row = dict(base, component=name, kind=kind, layer=layer, attribution=c - r,
                       attr_chosen=c, attr_rejected=r, margin=margin)
            out[prefix + "attribution"].append(row)
        for name in blocks + head_names:
            kind, layer, _ = parse_component(name)
            for mode in (head_modes if kind == "head" else block_modes):
                value, off = patched[(name, mode)]
                check_finite(value[p:p + 1], f"pair {pair['pair_id']}, {name} patched ({mode})")
                effect = float(value[p]) - margin
                z = None if math.isnan(float(off[p])) else round(float(off[p]), PLACES)
                row = dict(base, component=name, kind=kind, layer=layer, mode=mode, clean_margin=margin,
                           patched_margin=float(value[p]), effect=effect,
                           moves_pct=_moves(effect, margin), offdist_z=z,
                           offdist_flag=None if z is None else z > offdist.THRESHOLD)
                out[prefix + ("patching_heads" if kind == "head" else "patching")].append(row)
        for i in range(adapter.n_layers):
            out[prefix + "lens"].append(dict(base, layer=i, depth=(i + 1) / adapter.n_layers,
                                             running_margin=float(running[i, 2 * p] - running[i, 2 * p + 1])))


def measure(adapter: Adapter, pairs: list[dict], progress: bool = True) -> tuple[dict, dict]:
    from tqdm import tqdm
    seqs, prompt_seqs = _encode(adapter, pairs)
    W, b = adapter.family.score.weight.detach().float(), adapter.family.score.bias.detach().float()
    gate = torch.cat([_gate(adapter, prompt_seqs[s:s + 32]) for s in range(0, len(pairs), 32)])
    shards: list[list[int]] = []
    for i, p in enumerate(pairs):  # consecutive pairs, at most SHARD, never across a split change
        if not shards or len(shards[-1]) == SHARD or pairs[shards[-1][0]]["split"] != p["split"]:
            shards.append([])
        shards[-1].append(i)
    adapter.set_directions(None)
    acc = StatsAccumulator()
    for shard in tqdm(shards, desc="clean pass (means)", disable=not progress):
        batch = adapter.batch([t for i in shard for t in seqs[2 * i:2 * i + 2]])
        acc.add(adapter, batch, adapter.clean_run(batch))
    stats = acc.finish(seeds=[p["seed_id"] for p in pairs])
    out = {name: [] for name in FILES}
    gate_own = defaultdict(list)
    for shard in tqdm(shards, desc="measuring minilm", disable=not progress):
        sp = [pairs[i] for i in shard]
        batch = adapter.batch([t for i in shard for t in seqs[2 * i:2 * i + 2]])
        own = torch.tensor([DIMENSIONS.index(pairs[i]["dimension"]) for i in shard for _ in (0, 1)])
        adapter.set_directions(W[own], b[own])
        _rows(adapter, sp, batch, "own", sp[0]["split"] == "heldout", MODES, HEAD_MODES, stats, out)
        g = gate[[i for i in shard for _ in (0, 1)]]
        adapter.set_directions(g @ W, g @ b)
        _rows(adapter, sp, batch, "gated", False, GATED_MODES, (), stats, out)
        for i in shard:
            gate_own[pairs[i]["dimension"]].append(float(gate[i, DIMENSIONS.index(pairs[i]["dimension"])]))
    adapter.set_directions(None)
    gate_summary = {d: rankstats.mean(gate_own[d]) for d in DIMENSIONS}
    return {k: fixed(v, PLACES) for k, v in out.items()}, gate_summary


# ----- the summary beyond measure.runner.summary.golden -------------------------------------------------
def _ranks(rows, field, sign=True):
    """{dimension: {component: score}} mean of `field` over pairs (|field|/|clean| for patching)."""
    acc = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["kind"] in ("attn", "mlp"):
            acc[r["dimension"]][r["component"]].append(
                r[field] if sign else rankstats.patch_fraction(r))
    return {d: {c: rankstats.mean(v) for c, v in comps.items()} for d, comps in acc.items()}


def gated_comparison(files: dict) -> dict:
    """How far the rankings move between each dimension's own direction and the gated one."""
    a_own = _ranks(files["attribution"], "attribution")
    a_gated = _ranks(files["gated_attribution"], "attribution")
    p_own = _ranks([r for r in files["patching"] if r["mode"] == "mean"], None, sign=False)
    p_gated = _ranks([r for r in files["gated_patching"] if r["mode"] == "mean"], None, sign=False)
    gated_rhos = rankstats.dimension_rhos(rankstats.component_scores(
        rankstats.join_rows(files["gated_attribution"], files["gated_patching"], "mean")))
    per = {}
    for d in DIMENSIONS:
        comps = sorted(a_own[d])
        per[d] = {
            "attribution_rho_own_vs_gated": rankstats.spearman([a_own[d][c] for c in comps], [a_gated[d][c] for c in comps]),
            "patch_rho_own_vs_gated": rankstats.spearman([p_own[d][c] for c in comps], [p_gated[d][c] for c in comps]),
            "rho_attribution_vs_patching_gated": gated_rhos[d],
        }
    return {
        "definition": "Spearman rho between the ranking of attn and mlp blocks read along the dimension's own objective direction and along the gated aggregate (gate held at its clean value on the prompt); mean-mode patching",
        "mean_attribution_rho_own_vs_gated": rankstats.mean(v["attribution_rho_own_vs_gated"] for v in per.values()),
        "mean_patch_rho_own_vs_gated": rankstats.mean(v["patch_rho_own_vs_gated"] for v in per.values()),
        "mean_rho_attribution_vs_patching_gated": rankstats.mean(gated_rhos.values()),
        "per_dimension": per,
    }


def objective_cosines(W: torch.Tensor) -> dict:
    Wn = W.double() / W.double().norm(dim=1, keepdim=True)
    cos = (Wn @ Wn.T).tolist()
    off = [cos[i][j] for i in range(len(cos)) for j in range(len(cos)) if i != j]
    return {"labels": list(DIMENSIONS), "values": cos, "mean_off_diagonal": sum(off) / len(off),
            "min_off_diagonal": min(off), "max_off_diagonal": max(off)}


def run(out: Path | None = None, max_pairs: int | None = None, progress: bool = True, threads: int = 1) -> dict:
    started = time.time()
    head, dirty = git_state(REPO)  # before the run writes the bundle, which would make the tree look dirty
    setup_determinism(0, threads, "cpu")
    final = Path(out) if out else REPO / "bundles" / "minilm"
    out = staging_dir(final)  # written in full beside the old bundle, then swapped in
    model, tokenizer = load_model()
    adapter = Adapter(model, tokenizer, "minilm", path=MODEL_DIR)
    pairs = read_jsonl(PAIRS_FILE)
    if max_pairs:  # a quick look: the first `max_pairs` seeds' worth of rows per dimension and split
        keep, seen = [], defaultdict(int)
        for p in pairs:
            seen[(p["dimension"], p["split"])] += 1
            if seen[(p["dimension"], p["split"])] <= max_pairs:
                keep.append(p)
        pairs = keep
    files, gate_summary = measure(adapter, pairs, progress)
    training = json.loads((MODEL_DIR / "training.json").read_text(encoding="utf-8"))
    for name, filename in FILES.items():
        write_atomic(out / filename, jsonl_text(files[name]))
    pairs_text = jsonl_text(pairs)
    write_atomic(out / "pairs.jsonl", pairs_text)
    identity = {"model": "minilm", **weights_identity(MODEL_DIR),
                "heads_sha256": training["heads_sha256"], "trunk_sha256": training["trunk_sha256"],
                "data_sha256": hashlib.sha256(pairs_text.encode()).hexdigest(), "seed": 0,
                "dtype": "float32", "device_type": "cpu", "objective": "own objective per dimension"}
    summary = summarise(out, identity, gate_summary, adapter.family.score.weight.detach(), training)
    manifest = {
        "study": "minilm", **identity,
        "model_config": dict(json.loads(model.config.to_json_string(use_diff=False)), _name_or_path="minilm"),
        "seeds": {"torch": 0, "bootstrap": BOOTSTRAP["seed"], "pairs_generator": "data/minilm (measure/studies/minilm/data.py)"},
        "data_file": str(PAIRS_FILE.relative_to(REPO)), "packages": versions(), "device": "cpu",
        "threads": threads, "git": {"commit": head, "dirty": dirty},
        "wall_time_s": round(time.time() - started, 3),
        "command": "python -m measure " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("__main__.py") else None,
    }
    write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, default=str) + "\n")
    replace_dir(out, final)
    return {"out": final, "golden": summary, "manifest": manifest}


def summarise(out: Path, identity: dict, gate_summary: dict, W: torch.Tensor, training: dict) -> dict:
    """golden.json and README.md of the bundle in `out`, from its rows as written."""
    written = {name: read_jsonl(out / filename) for name, filename in FILES.items()}
    written["attribution_heads"] = []  # not written (see the module docstring)
    extra = {
        "attribution_sum_gap": max(attribution_gap(written["attribution"]),
                                   attribution_gap(written["gated_attribution"])),
        "attribution": "every LayerNorm's scale frozen at its clean value; direct path to the mean-pooled read (measure/models/bert.py)",
        "directions": {"main files": "each dimension's own objective head", "gated_ files": "the gated aggregate, gate held at its clean value on the prompt"},
        "heads_scope": "patched on the held-out pairs only, mean mode; head attribution not written (bundle size)",
        "per_dimension_rho_ci": rho_intervals(written["attribution"], written["patching"], "mean", DIMENSIONS),
        "gated_comparison": gated_comparison(written),
        "gated_crystallization": _crystal(written["gated_lens"]),
        "gate_weight_on_own_objective": gate_summary,
        "objective_cosines": fixed(objective_cosines(W), 6),
        "heldout_accuracy": {d: {k: training["heldout"][d][k] for k in ("accuracy", "ci", "gated_accuracy", "gated_ci", "n", "n_effective")}
                             for d in DIMENSIONS},
        "heldout_accuracy_mean": training["heldout_mean"],
        "heldout_interval": training["interval"],
    }
    summary = golden("minilm", "minilm", identity, written, None, TOLERANCE, extra)
    summary = fixed(summary, 6)
    write_atomic(out / "golden.json", json_text(summary))
    from measure.studies.minilm.readme import bundle_readme
    write_atomic(out / "README.md", bundle_readme(summary))
    return summary


def _crystal(lens_rows):
    from measure.runner.summary import crystallization
    return crystallization(lens_rows)
