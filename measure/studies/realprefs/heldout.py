"""Every evaluation pair of the realprefs study scored along every objective head, beside the baselines.

The accuracy and the preregistered test (docs/realprefs-plan.md) are over every evaluation pair of
an objective, not only the instrument pairs; a small run (`--max-pairs`) scores its instrument
pairs only, and `golden.json` says how many it scored. Each sequence runs alone through the model's
own forward pass (a batch of one, no padding), so a pair's margins depend on its tokens only, as
the trainer's dev scoring does. Scores are saved in chunks of `CHUNK` pairs under the run's folder,
each written atomically, so a killed run resumes at the first missing chunk.

`heldout_per_pair.jsonl`, one row per pair, in the data's order (`data.load_pairs`):
`dimension`, `pair_id`, `seed_id` (the group), `margin` (along its own objective's head),
`margin_head_<objective>` along every head, and `margin_<baseline>` of each of the three baselines
(`data/realprefs/baselines_eval.jsonl`, made on the training side before any model existed).
`heads.json`: the heads' rows and biases (`objectives`, `weight`, `bias`), for their cosines.
"""
from __future__ import annotations

import hashlib
import json

import torch

from bundle_kit import localize
from safe_io import write_atomic

from measure.errors import MeasureError
from measure.runner.jsonio import fixed, json_text, jsonl_text
from measure.studies.realprefs.data import DATA

CHUNK = 256
BASELINE_ROWS = DATA / "realprefs" / "baselines_eval.jsonl"


def baseline_margins(path=None) -> dict[str, dict[str, float]]:
    """{pair_id: {baseline: margin}} from the baselines' held-out rows; one line when missing."""
    path = path or BASELINE_ROWS
    if not path.is_file():
        raise MeasureError(f"{path}: missing; python -m measure.studies.realprefs.baselines writes it")
    out = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        row = json.loads(line)
        try:
            out[row["pair_id"]] = {b: float(row[f"margin_{b}"]) for b in localize.BASELINES}
        except (KeyError, TypeError, ValueError):
            raise MeasureError(f"{path}:{number}: a row needs pair_id and margin_<baseline> for "
                               f"{', '.join(localize.BASELINES)}") from None
    return out


def baseline_identity(path=None) -> str:
    """The sha256 of the baselines' held-out rows (in the study's identity: refused before measuring when absent)."""
    path = path or BASELINE_ROWS
    baseline_margins(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def scored_pairs(plan) -> list[dict]:
    """The pairs scored: every evaluation pair of the plan's objectives, or with `--max-pairs`
    the plan's own (instrument) pairs."""
    if plan.config.max_pairs is not None:
        return plan.pairs
    objectives = set(p["dimension"] for p in plan.pairs)
    return [p for p in plan.definition.read(plan.pairs_file) if p["dimension"] in objectives]


def score(plan, pairs: list[dict]) -> list[list[float]]:
    """Per pair, its margin along every head (in `config.objectives` order); chunks resumed."""
    from tqdm import tqdm

    adapter, folder = plan.adapter, plan.run_dir / "heldout"
    ids = [plan.definition.encode(adapter, p, p["pair_id"]) for p in pairs]
    digest = hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode()).hexdigest()[:16]
    folder = folder / digest
    folder.mkdir(parents=True, exist_ok=True)
    out: list[list[float]] = []
    chunks = range(0, len(pairs), CHUNK)
    with tqdm(total=len(pairs), desc="scoring the evaluation pairs", disable=not plan.config.progress) as bar:
        for start in chunks:
            path = folder / f"chunk_{start // CHUNK:05d}.json"
            if not path.exists():
                margins = []
                with torch.no_grad():
                    for chosen, rejected in ids[start:start + CHUNK]:
                        r = [adapter.model(torch.tensor([s], device=adapter.device))["objective_rewards"][0].double()
                             for s in (chosen, rejected)]
                        margins.append([float(v) for v in r[0] - r[1]])
                write_atomic(path, json.dumps(fixed(margins, 8)) + "\n")
            out.extend(json.loads(path.read_text(encoding="utf-8")))
            bar.update(min(CHUNK, len(pairs) - start))
    return out


def files(plan) -> dict[str, str]:
    """{name: text} of `heldout_per_pair.jsonl` and `heads.json`."""
    model = plan.adapter.model
    names = list(model.config.objectives)
    pairs = scored_pairs(plan)
    base = baseline_margins()
    margins = score(plan, pairs)
    rows = []
    for p, m in zip(pairs, margins):
        if p["pair_id"] not in base:
            raise MeasureError(f"{BASELINE_ROWS}: lacks evaluation pair {p['pair_id']}")
        rows.append({"dimension": p["dimension"], "pair_id": p["pair_id"], "seed_id": p["seed_id"],
                     "margin": m[names.index(p["dimension"])],
                     **{f"margin_head_{o}": m[k] for k, o in enumerate(names)},
                     **{f"margin_{b}": base[p["pair_id"]][b] for b in localize.BASELINES}})
    heads = {"objectives": names, "weight": model.heads.weight.detach().double().tolist(),
             "bias": model.heads.bias.detach().double().tolist()}
    return {localize.FILES["heldout"]: jsonl_text(rows), localize.WEIGHTS: json_text(heads, 8)}


def stand_in_baselines(path, seed: int = 0):
    """Random baseline margins for every evaluation pair, written to `path` in the layout of
    `BASELINE_ROWS`: a stand-in for the tests and benchmarks that run the study on a small model
    without the real baselines (`python -m measure.studies.realprefs.baselines` makes those)."""
    import random

    from measure.studies.realprefs.data import load_pairs
    from measure.studies.realprefs.split import load_split

    pairs = load_pairs()
    side = load_split(pairs)
    rng = random.Random(seed)
    path.write_text("".join(json.dumps({"pair_id": p.pair_id, "margin_length": rng.choice([-1.0, 1.0]),
                                        "margin_bag_of_words": rng.gauss(0, 1), "margin_frozen_trunk": rng.gauss(0, 1)})
                            + "\n" for p in pairs if side[p.pair_id] == "eval"), encoding="utf-8")
    return path
