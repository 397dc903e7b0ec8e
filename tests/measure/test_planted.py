"""The hand-built planted organisms (measure/studies/planted/): a deterministic, CPU-independent
construction, a key that comes from the design, a loud background, and a key check by per-side
resample ablation that passes on the organisms and fails on a wrong key."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from measure.runner.jsonio import read_jsonl
from measure.instruments import resample
from measure.studies.planted import circuits, verify
from measure.studies.planted import data as pdata
from measure.studies.planted import organisms
from measure.studies.planted.design import (FAMILIES, NOISE_RANGE, READS, SEEDS, component, design,
                                            dimension_name, key_of)

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def shallow0():
    folder = organisms.ensure_built("shallow", 0)   # rebuilds if the weights are missing; checks the sha256
    from measure.models.adapter import load
    return folder, load(str(folder))


def _layer(where):
    return where[1]


def test_every_design_is_deterministic_and_meets_its_constraints():
    for family, spec in FAMILIES.items():
        for seed in SEEDS:
            d = design(family, seed)
            assert d == design(family, seed)
            heads = [tuple(w) for p in d["placement"].values() for w in p.values() if w[0] == "head"]
            assert len(heads) == len(set(heads))                    # one role per head
            assert sum(1 for h in heads if h[1] == 0) <= spec["heads"] - 2   # layer 0 keeps two background heads
            for rule, mech in spec["rules"].items():
                where = d["placement"][rule]
                mlps = [w[1] for w in where.values() if w[0] == "mlp"]
                assert len(mlps) == len(set(mlps))                  # a rule's MLP members are distinct blocks
                for reader, writers in READS[mech].items():
                    for writer in writers:
                        r, w = where[reader], where[writer]
                        assert r[1] >= w[1] if (r[0], w[0]) == ("mlp", "head") else r[1] > w[1], (family, seed, rule)
                for member, w in where.items():
                    if member == "early":
                        assert w[1] <= (0 if spec["layers"] <= 4 else 1)
                    if member == "late_mover":
                        assert w[1] >= spec["layers"] // 2
            assert len(set(d["channels"].values())) == len(d["channels"])
    assert design("shallow", 0) != design("shallow", 1)


def test_the_background_is_loud_zero_sum_and_sized_as_designed():
    for family in FAMILIES:
        d = design(family, 0)
        n_heads = d["layers"] * d["heads"]
        designated = {tuple(w[1:]) for p in d["placement"].values() for w in p.values() if w[0] == "head"}
        assert len(d["background_heads"]) == n_heads - len(designated)       # every other head is background
        assert len(d["background_mlps"]) == d["layers"]                       # every MLP has a background unit
        for block in (d["background_heads"], d["background_mlps"]):
            total = [sum(col) for col in zip(*(v["vector"] for v in block.values()))]
            assert max(abs(t) for t in total) < 1e-9                          # the pushes cancel in total
            assert all(NOISE_RANGE[0] <= v["designed_push"] <= NOISE_RANGE[1] for v in block.values())
            assert all(any(abs(x) > 0 for x in v["vector"]) for v in block.values())
    values = design("mid", 2)["word_values"]
    for k in range(6):   # filler values are centred: a swapped filler pushes up or down with mean zero
        assert abs(sum(values[w][k] for w in pdata.FILLERS)) < 1e-9


def test_rebuilt_weights_match_the_committed_sha256_on_any_cpu_capability():
    record = json.loads((organisms.organism_dir("deep", 1) / "construction.json").read_text(encoding="utf-8"))
    model, _ = organisms.build_model("deep", 1)
    assert organisms.tensor_sha256(model.state_dict()) == record["weights_sha256"]
    # the construction runs no arithmetic in torch: the same bytes under the default kernels
    code = ("from measure.studies.planted import organisms as o; "
            "print(o.tensor_sha256(o.build_model('mid', 3)[0].state_dict()))")
    env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    expected = json.loads((organisms.organism_dir("mid", 3) / "construction.json").read_text(encoding="utf-8"))
    assert out.stdout.strip() == expected["weights_sha256"], out.stderr[-2000:]


def test_the_key_comes_from_the_design():
    key = key_of("deep", 0)
    d = design("deep", 0)
    rules = {spec["rule"]: spec for spec in key["dimensions"].values()}
    backups = rules["politeness"]
    assert backups["mechanism"] == "backups" and backups["aimed_at"] == "patching"
    assert sorted(r["shapley"] for r in backups["roles"].values()) == pytest.approx([-1 / 3, 2 / 3, 2 / 3], abs=1e-6)
    assert backups["keys"]["single"] == [component(d["placement"]["politeness"]["repair"])]
    fallback = rules["hazard"]
    assert sorted(r["shapley"] for r in fallback["roles"].values()) == pytest.approx([1 / 6, 1 / 6, 2 / 3], abs=1e-6)
    assert fallback["keys"]["single"] == []     # no single removal moves a fallback rule
    assert fallback["keys"]["direct"] == [component(d["placement"]["hazard"]["primary"])]
    relay = rules["detail"]
    assert relay["keys"]["direct"] == [component(d["placement"]["detail"]["late_mover"])]
    decoy = rules["hedging"] if rules["hedging"]["mechanism"] == "decoy" else key_of("mid", 0)["dimensions"]["mid-s0-hedging"]
    assert {r["role"] for r in decoy["distractors"].values()} == {"decoy", "canceller", "backup_canceller"}
    assert not set(decoy["distractors"]) & set(decoy["components"])
    committed = json.loads((organisms.organism_dir("deep", 0) / organisms.ANSWER_KEY).read_text(encoding="utf-8"))
    assert committed["dimensions"] == json.loads(json.dumps(key["dimensions"]))


def test_each_trap_does_in_the_design_what_it_is_planted_for():
    w = 1.0
    removal = lambda name: circuits.removal_effect(circuits.mechanism(name, {"share": 0.7, "decoy_gain": 3.0}), w)  # noqa: E731
    assert removal("backups") == pytest.approx({"b1": 0.0, "b2": 0.0, "repair": 1.0})
    assert removal("fallback") == pytest.approx({"primary": 0.0, "fb_detector": 0.0, "fb_scorer": 0.0})
    assert removal("decoy") == pytest.approx({"c1": -0.7, "c2": -0.3, "decoy": 0.0, "canceller": 0.0, "backup_canceller": 0.0})
    direct = lambda name: circuits.direct_share(circuits.mechanism(name, {"share": 0.7, "decoy_gain": 3.0}), w)  # noqa: E731
    assert direct("upstream")["early"] == 0 and direct("indirect")["mover"] == 0
    assert direct("decoy")["decoy"] == 3.0 and direct("decoy")["canceller"] == -3.0
    gate = circuits.mechanism("offdist", {})
    assert circuits.simulate(gate, w, {"topic_gate": ("zero", 0.0)}) == 0.0    # a zeroed topic sign shuts the rule
    assert circuits.simulate(gate, w, {"topic_gate": ("source", 0.0)}) == 1.0  # any real input's sign keeps it


def test_clean_margins_are_the_planted_weights(shallow0):
    folder, adapter = shallow0
    assert not (folder / "word_vocab.json").exists()  # AutoTokenizer, tokenizer.json
    ids = adapter.encode("tell me about the rain", "we go please")
    assert adapter.tokenizer.convert_ids_to_tokens(ids) == \
        ["<bos>", "tell", "me", "about", "the", "rain", "<sep>", "we", "go", "please", "<eos>"]
    pairs = read_jsonl(folder / "pairs.jsonl")
    seqs = [t for p in pairs for t in (adapter.encode(p["prompt"], p["chosen"]), adapter.encode(p["prompt"], p["rejected"]))]
    run = adapter.clean_run(adapter.batch(seqs))
    rewards = run.reward.tolist()
    assert max(abs(r) for r in rewards) > 1.0     # the background is loud in the reward itself
    for p, c, r in zip(pairs, rewards[0::2], rewards[1::2]):
        rule = p["dimension"].rsplit("-", 1)[1]
        assert c - r == pytest.approx(abs(pdata.WEIGHTS[rule]), abs=1e-3), p["pair_id"]


def test_the_key_check_passes_and_fails_on_a_wrong_key(shallow0):
    folder, adapter = shallow0
    key = json.loads((folder / organisms.ANSWER_KEY).read_text(encoding="utf-8"))
    twins = read_jsonl(folder / "verify_twins.jsonl")
    d = design("shallow", 0)
    traps = ("hazard", "certainty", "hedging")
    result = verify.verify(adapter, twins, key, d, rules=traps)    # every check of three traps
    assert all(r["passes"] for r in result.values()), {k: r["worst"] for k, r in result.items()}
    assert all(0.25 < r["sources_with_word"] < 0.75 for r in result.values())
    assert result["hedging"]["checks"]["resample b1"]["mean_deviation"] < 1e-3        # one backup: nothing moves
    wrong = json.loads(json.dumps(key))
    dims = wrong["dimensions"]
    hazard, certainty, hedging = (dims[dimension_name("shallow", 0, r)] for r in traps)
    hazard["components"] = hazard["components"][1:]              # the upstream MLP left out
    certainty["components"] += [c for c, r in certainty["distractors"].items() if r["role"] == "decoy"]
    hedging["components"] = hedging["components"][1:]            # one backup left out
    bad = verify.verify(adapter, twins, wrong, d, rules=traps, checks=("necessity", "sufficiency"))
    assert bad["hazard"]["checks"]["sufficiency"]["mean_deviation"] > 0.3
    assert bad["certainty"]["checks"]["sufficiency"]["mean_deviation"] > 1.0   # the decoy, uncancelled
    assert bad["hedging"]["checks"]["necessity"]["mean_deviation"] > 0.3
    assert not any(bad[r]["passes"] for r in traps)


def test_each_side_of_a_pair_gets_its_own_source():
    import random
    twins = read_jsonl(organisms.organism_dir("mid", 0) / "verify_twins.jsonl")
    lengths = [len(t["prompt"].split()) + len(t["chosen"].split()) + 3 for t in twins]
    sources = resample.per_side_sources(twins, lengths, random.Random(0))
    for p, ((q1, _s1), (q2, _s2)) in enumerate(sources):
        assert q1 != q2 and p not in (q1, q2)
        assert lengths[q1] == lengths[q2] == lengths[p]


# ---------------------------------------------------------------- the scorecard's statistics
from bundle_kit import rankstats  # noqa: E402


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
