"""The hand-built planted organisms: deterministic construction, a key that passes its
resample-ablation check, and a check that fails when the key is wrong."""
from __future__ import annotations

import json

import pytest

from measure.studies.planted import organisms as planted
from measure.studies.planted import data as pd
from measure.runner.jsonio import read_jsonl

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def organism0():
    folder = planted.ensure_built(0)  # rebuilds if the weights are missing; checks the sha256
    from measure.models.adapter import load
    return folder, load(str(folder), folder)


def test_design_is_deterministic_and_meets_its_constraints():
    for seed in planted.SEEDS:
        d = planted.design(seed)
        assert d == planted.design(seed)
        mlps = [d["hazard_mlp"], d["repair_mlp"], d["canceller_mlp"], d["scorer_mlp"]]
        assert len(set(mlps)) == 4
        assert d["hazard_mlp"] < d["hazard_mover"][0] and d["hazard_mover"][0] >= 5
        assert d["repair_mlp"] >= max(d["backup_a"][0], d["backup_b"][0])
        assert d["canceller_mlp"] >= d["decoy"][0] and d["scorer_mlp"] >= d["detail_mover"][0]
        slots = [d[k] for k in ("hazard_mover", "backup_a", "backup_b", "carrier_c1", "carrier_c2",
                                "decoy", "detail_mover", "tracker", "carrier_p1", "carrier_p2")]
        assert len(set(slots)) == len(slots)
        assert sorted(d["channels"].values()) + d["scratch"] == sorted(d["channels"].values()) + sorted(d["scratch"])
        assert len(set(d["channels"].values()) | set(d["scratch"])) == planted.HIDDEN
    assert planted.design(0) != planted.design(1)


def test_rebuilt_weights_match_the_committed_sha256():
    record = json.loads((planted.organism_dir(1) / "construction.json").read_text(encoding="utf-8"))
    model, _ = planted.build_model(1)
    assert planted.tensor_sha256(model.state_dict()) == record["weights_sha256"]


def test_key_comes_from_the_design_with_shapley_strengths():
    key = planted.key_of(0)
    d = planted.design(0)
    rules = {spec["rule"]: spec for spec in key["dimensions"].values()}
    hedging = rules["hedging"]
    strengths = sorted(r["strength"] for r in hedging["roles"].values())
    assert strengths == pytest.approx([1 / 3, 2 / 3, 2 / 3], abs=1e-6)
    assert rules["hazard"]["components"] == [f"mlp_L{d['hazard_mlp']}",
                                                    "head_L{}_H{}".format(*d["hazard_mover"])]
    assert {r["role"] for r in rules["certainty"]["distractors"].values()} == {"decoy", "canceller"}
    assert rules["politeness"]["roles"]["head_L{}_H{}".format(*d["carrier_p1"])]["strength"] \
        == pytest.approx(d["share_politeness"])
    committed = json.loads((planted.organism_dir(0) / "key.json").read_text(encoding="utf-8"))
    assert committed["dimensions"] == key["dimensions"]


def test_shapley_of_an_and_gate_and_an_additive_game():
    assert planted.shapley(["a", "b"], lambda S: float("a" in S and "b" in S)) == {"a": 0.5, "b": 0.5}
    assert planted.shapley(["a", "b"], lambda S: 0.3 * ("a" in S) + 0.7 * ("b" in S)) == \
        pytest.approx({"a": 0.3, "b": 0.7})


def test_standard_tokenizer_and_planted_margins(organism0):
    folder, adapter = organism0
    assert not (folder / "word_vocab.json").exists()  # AutoTokenizer, tokenizer.json
    ids = adapter.encode("tell me about the rain", "we go please")
    assert adapter.tokenizer.convert_ids_to_tokens(ids) == \
        ["<bos>", "tell", "me", "about", "the", "rain", "<sep>", "we", "go", "please", "<eos>"]
    pairs = read_jsonl(folder / "pairs.jsonl")
    seqs = [t for p in pairs for t in (adapter.encode(p["prompt"], p["chosen"]),
                                       adapter.encode(p["prompt"], p["rejected"]))]
    run = adapter.clean_run(adapter.batch(seqs))
    margins = (run.reward[0::2] - run.reward[1::2]).tolist()
    for p, m in zip(pairs, margins):
        rule = p["dimension"].split("-", 1)[1]
        assert m == pytest.approx(abs(pd.WEIGHTS[rule]), rel=0.02), p["pair_id"]


def test_key_verification_passes_and_fails_on_a_wrong_key(organism0):
    folder, adapter = organism0
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    twins = [t for t in read_jsonl(folder / "verify_twins.jsonl")][:: 3]
    result = planted.verify(adapter, twins, key, seed=0)
    assert all(r["passes"] for r in result.values()), result
    # drop the early MLP from the hazard key: the margin then survives "necessity" ablation
    wrong = json.loads(json.dumps(key))
    hazard, certainty = wrong["dimensions"]["s0-hazard"], wrong["dimensions"]["s0-certainty"]
    hazard["components"] = hazard["components"][1:]
    certainty["components"] += list(certainty["distractors"])[:1]
    bad = planted.verify(adapter, twins, wrong, seed=0)
    assert not bad["hazard"]["passes"] and bad["hazard"]["sufficiency_retained"] < 0.5
    assert bad["certainty"]["sufficiency_retained"] > 1 + planted.VERIFY_TOLERANCE  # the decoy, uncancelled


# ---------------------------------------------------------------- the scorecard's statistics
from bundle_kit import keyrecovery, rankstats  # noqa: E402


def test_auc_of_abs_scores_and_spearman_match_scipy_with_ties():
    stats = pytest.importorskip("scipy.stats")
    import random
    rng = random.Random(3)
    for _ in range(20):
        scores = [abs(rng.choice([0.0, 0.0, 1e-5, rng.gauss(0, 1)])) for _ in range(30)]
        positive = [rng.random() < 0.2 for _ in scores]
        if not any(positive) or all(positive):
            continue
        pos = [s for s, p in zip(scores, positive) if p]
        neg = [s for s, p in zip(scores, positive) if not p]
        u = stats.mannwhitneyu(pos, neg, alternative="two-sided").statistic
        assert rankstats.roc_auc(scores, positive) == pytest.approx(u / (len(pos) * len(neg)))
        strength = [rng.choice([0.0, 0.5, 1.0]) if p else 0.0 for p in positive]
        assert rankstats.spearman(scores, strength) == pytest.approx(stats.spearmanr(scores, strength).statistic)


def test_topk_inclusion_equals_random_tie_breaking():
    import itertools
    scores = [3.0, 1.0, 1.0, 1.0, 0.0, 2.0]
    for k in range(1, 6):
        got = rankstats.topk_inclusion(scores, k)
        counts = [0] * len(scores)
        orders = list(itertools.permutations(range(len(scores))))
        for order in orders:  # every tie-breaking order equally likely
            ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], order.index(i)))
            for i in ranked[:k]:
                counts[i] += 1
        assert got == pytest.approx([c / len(orders) for c in counts])


def test_percentile_interval_is_seed_bootstraps():
    seeds = [f"s{i}" for i in range(12)]
    values = {s: i * 0.1 for i, s in enumerate(seeds)}
    stat = lambda drawn: rankstats.mean(values[s] for s in drawn)  # noqa: E731
    import random
    rng = random.Random(0)
    distinct = sorted(set(seeds))
    draws = [stat([rng.choice(distinct) for _ in distinct]) for _ in range(200)]
    assert rankstats.percentile_interval(draws) == rankstats.seed_bootstrap(seeds, stat, resamples=200)


def test_hierarchical_bootstrap_resamples_groups_then_seeds():
    groups = {"a": {"r": ["a1", "a2", "a3"]}, "b": {"r": ["b1", "b2", "b3"]}}
    value = {"a1": 0.0, "a2": 0.0, "a3": 0.0, "b1": 1.0, "b2": 1.0, "b3": 1.0}

    def stat(sample):
        return {"m": rankstats.mean(value[s] for _g, strata in sample for seeds in strata.values() for s in seeds)}

    two = rankstats.hierarchical_bootstrap(groups, stat, resamples=400)["m"]
    fixed = rankstats.hierarchical_bootstrap(groups, stat, resamples=400, resample_groups=False)["m"]
    assert two == (0.0, 1.0)      # drawing organisms: both all-a and all-b samples occur
    assert fixed == (0.5, 0.5)    # organisms fixed, seeds within identical: no spread
    assert two == rankstats.hierarchical_bootstrap(groups, stat, resamples=400)["m"]


def _rows(dimension, seed, attributions, patch_effects):
    a = [{"dimension": dimension, "pair_id": seed, "seed_id": seed, "component": c, "attribution": v,
          "margin": 1.0} for c, v in attributions.items()]
    p = [{"dimension": dimension, "pair_id": seed, "seed_id": seed, "component": c, "mode": mode,
          "clean_margin": 1.0, "effect": v} for c, v in patch_effects.items() for mode in ("mean", "zero", "swap")]
    return a, p


def test_keyrecovery_scores_a_perfect_and_a_reversed_method_and_catches_tampering():
    comps = ["head_L0_H0", "head_L0_H1", "mlp_L0", "mlp_L1", "head_L1_H0", "head_L1_H1"]
    key = {"dimensions": {}}
    attribution, patching = [], []
    for org in ("o1", "o2"):
        d = f"{org}-rule"
        key["dimensions"][d] = {"organism": org, "rule": "rule", "components": comps[:2],
                                "roles": {comps[0]: {"role": "carrier", "strength": 0.7},
                                          comps[1]: {"role": "carrier", "strength": 0.3}},
                                "distractors": {comps[2]: {"role": "decoy", "strength": 0.0}}}
        for seed in ("x", "y"):
            a, p = _rows(d, f"{org}{seed}", {c: (-(0.7, 0.3, 5, 0, 0, 0)[i]) for i, c in enumerate(comps)},
                         {c: (0.0, 0.0, 0.1, 0.2, 0.3, 0.4)[i] for i, c in enumerate(comps)})
            attribution += a
            patching += p
    block = keyrecovery.summary(attribution, patching, key, {"resamples": 50})
    assert block["auc"]["attribution"]["mean"] == 0.75         # the key beats all but the decoy
    assert block["auc"]["patching_mean"]["mean"] == 0.0        # patching ranks it last
    assert block["gap"]["mean_minus_attribution"] == -0.75
    assert block["distractor_rate"]["attribution"]["decoy"] == 1.0
    assert block["role_recall"]["attribution"]["carrier"] == 0.5
    assert block["rho_strength"]["attribution"]["mean"] == pytest.approx(
        rankstats.spearman([0.7, 0.3, 5, 0, 0, 0], [0.7, 0.3, 0, 0, 0, 0]))
    published = json.loads(json.dumps(block))
    _lines, _c, ok = keyrecovery.check(attribution, patching, key, published, 1e-6)
    assert ok
    published["auc"]["patching_swap"]["per_organism"]["o2"] = 0.25
    _lines, comparisons, ok = keyrecovery.check(attribution, patching, key, published, 1e-6)
    assert not ok and max(comparisons)[1] == "key_recovery/auc/patching_swap/per_organism/o2"
