"""The committed planted-key organism (models/organism/): its rules hold on held-out pairs."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from measure.studies.organism import data as od
from measure.models.adapter import load
from measure.runner.jsonio import jsonl_text, read_jsonl
from measure.studies.organism.train import SETTINGS, make_data

ORGANISM = Path(__file__).resolve().parents[2] / "models" / "organism"
MIN_ACCURACY = 0.75   # every dimension; the mean must reach MIN_MEAN
MIN_MEAN = 0.9


def _margins(adapter, rows):
    seqs = []
    for r in rows:
        seqs += [adapter.encode(r["prompt"], r["chosen"]), adapter.encode(r["prompt"], r["rejected"])]
    batch = adapter.batch(seqs)
    with torch.no_grad():
        reward = adapter.clean_run(batch).reward
    return reward[0::2] - reward[1::2]


def test_the_trained_organism_prefers_chosen_on_held_out_pairs():
    adapter = load("organism")
    heldout = read_jsonl(ORGANISM / "heldout.jsonl")
    training = json.loads((ORGANISM / "training.json").read_text())
    accuracy = {}
    for dimension in od.DIMENSIONS:
        rows = [r for r in heldout if r["dimension"] == dimension]
        assert len(rows) == SETTINGS["heldout_per_dimension"]
        accuracy[dimension] = float((_margins(adapter, rows) > 0).float().mean())
        assert accuracy[dimension] >= MIN_ACCURACY, (dimension, accuracy[dimension])
        assert abs(accuracy[dimension] - training["heldout_accuracy"][dimension]) < 1e-6
    assert sum(accuracy.values()) / len(accuracy) >= MIN_MEAN, accuracy


def test_held_out_pairs_follow_the_planted_rules_and_are_not_trained_on():
    heldout = read_jsonl(ORGANISM / "heldout.jsonl") + read_jsonl(ORGANISM / "pairs.jsonl")
    train = {(r["prompt"], r["chosen"], r["rejected"]) for r in read_jsonl(ORGANISM / "train.jsonl")}
    for r in heldout:
        fc, fr = od.features(r["prompt"], r["chosen"]), od.features(r["prompt"], r["rejected"])
        assert [d for d in od.DIMENSIONS if fc[d] != fr[d]] == [r["dimension"]]
        assert od.planted_reward(r["prompt"], r["chosen"]) > od.planted_reward(r["prompt"], r["rejected"])
        assert (r["prompt"], r["chosen"], r["rejected"]) not in train


def test_committed_data_is_what_the_seeded_generator_makes():
    settings = json.loads((ORGANISM / "training.json").read_text())["settings"]
    for name, rows in make_data(settings).items():
        assert (ORGANISM / f"{name}.jsonl").read_text(encoding="utf-8") == jsonl_text(rows), name


def test_the_key_names_components_of_the_organism():
    key = json.loads((ORGANISM / "key.json").read_text())
    adapter = load("organism")
    known = set(adapter.components())
    assert sorted(key["dimensions"]) == sorted(od.DIMENSIONS)
    for dimension, entry in key["dimensions"].items():
        assert entry["components"], dimension
        assert set(entry["components"]) <= known
        universe = [c for c in entry["twin_delta"] if c.startswith(("mlp_", "head_"))]
        top = max(entry["twin_delta"][c] for c in universe)
        expected = sorted(c for c in universe if entry["twin_delta"][c] >= key["threshold_fraction"] * top)
        assert sorted(entry["components"]) == expected
