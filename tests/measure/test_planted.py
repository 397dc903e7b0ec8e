"""The hand-built planted organisms: deterministic construction, a key that passes its
resample-ablation check, and a check that fails when the key is wrong."""
from __future__ import annotations

import json

import pytest

from measure import planted
from measure import planted_data as pd
from measure.jsonio import read_jsonl

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def organism0():
    folder = planted.ensure_built(0)  # rebuilds if the weights are missing; checks the sha256
    from measure.adapter import load
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
    hedging = key["rules"]["hedging"]
    strengths = sorted(r["strength"] for r in hedging["roles"].values())
    assert strengths == pytest.approx([1 / 3, 2 / 3, 2 / 3], abs=1e-6)
    assert key["rules"]["hazard"]["components"] == [f"mlp_L{d['hazard_mlp']}",
                                                    "head_L{}_H{}".format(*d["hazard_mover"])]
    assert {r["role"] for r in key["rules"]["certainty"]["distractors"].values()} == {"decoy", "canceller"}
    assert key["rules"]["politeness"]["roles"]["head_L{}_H{}".format(*d["carrier_p1"])]["strength"] \
        == pytest.approx(d["share_politeness"])
    committed = json.loads((planted.organism_dir(0) / "key.json").read_text(encoding="utf-8"))
    assert committed["rules"] == key["rules"]


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
    wrong["rules"]["hazard"]["components"] = wrong["rules"]["hazard"]["components"][1:]
    wrong["rules"]["certainty"]["components"] += list(wrong["rules"]["certainty"]["distractors"])[:1]
    bad = planted.verify(adapter, twins, wrong, seed=0)
    assert not bad["hazard"]["passes"] and bad["hazard"]["sufficiency_retained"] < 0.5
    assert bad["certainty"]["sufficiency_retained"] > 1 + planted.VERIFY_TOLERANCE  # the decoy, uncancelled
