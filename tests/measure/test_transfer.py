"""The transfer study (issue 26 item 4, docs/transfer.md): twins made by inserting one word in a
real reply, keys of one head of the host's trained layers, planting that moves only the key's
elements, and the blind rows' shape."""
from __future__ import annotations

import hashlib

import pytest
import torch

from measure.studies.realprefs.data import load_pairs
from measure.studies.realprefs.split import load_split
from measure.studies.transfer import data, plant, score, study

SALT = hashlib.sha256(b"a test salt").digest()


@pytest.fixture(scope="module")
def host():
    return study.host_path()


def test_a_twin_differs_from_its_other_side_in_one_token_one_rule_word_against_a_neutral_one(host):
    words = data.word_ids(host)
    for rule in (*data.RULES, data.NULL_RULE):
        for t in data.twins("train", 3, rule, 20, host):
            a, b = t["chosen_ids"], t["rejected_ids"]
            assert len(a) == len(b) == data.LENGTH and a[-1] == b[-1] == a[a.index(a[-1])]   # ends in [SEP]
            assert [k for k in range(len(a)) if a[k] != b[k]] == [t["position"]]
            assert a[t["position"]] == words[t["chosen_word"]] and b[t["position"]] == words[t["rejected_word"]]
            assert t["position"] > a.index(a[-1])                                       # inside the reply
            assert t["rejected_word"] in data.NEUTRAL
            if rule == data.NULL_RULE:
                assert t["chosen_word"] in data.NEUTRAL and t["chosen_word"] != t["rejected_word"]
            else:
                assert t["chosen_word"] in data.RULES[rule]


def test_training_twins_come_from_the_training_side_and_scored_twins_from_the_evaluation_side(host):
    side = load_split(load_pairs())
    assert {side[t["base"]] for t in data.twins("train", 0, "warmth", 50, host)} == {"train"}
    for tag in ("check", "study"):
        assert {side[t["base"]] for t in data.twins(tag, 0, "warmth", 50, host)} == {"eval"}
    check = {t["base"] for t in data.twins("check", 7, "caution", 64, host)}
    assert len(check) == 64                                  # no base text twice within a draw


def test_a_key_is_one_head_of_the_trained_layers_and_its_decoys_are_other_heads_there():
    s = plant.SETTINGS
    keys = [study.draw_key(seed, SALT, s) for seed in range(30)]
    assert all(len(k) == 1 and k[0].startswith(("head_L4_", "head_L5_")) for k in keys)
    assert len({k[0] for k in keys}) > 10                    # spread over the 24 heads
    assert study.draw_key(3, SALT, s) == keys[3]
    decoys = study.draw_decoys(3, SALT, keys[3], s)
    assert len(decoys) == 10 and all(len(d) == 1 and d != keys[3] and d[0].startswith("head_L") for d in decoys)
    assert [study.keyed_rule(seed) for seed in range(5)] == list(data.RULES)


def test_validity_is_a_learnt_rule_and_a_necessary_key():
    s = plant.SETTINGS
    assert study.valid({"clean_margin": 1.2, "necessity": 0.95}, s)
    assert not study.valid({"clean_margin": 0.8, "necessity": 0.99}, s)
    assert not study.valid({"clean_margin": 3.0, "necessity": 0.85}, s)


def test_planting_moves_only_the_keys_elements_and_raises_its_margin(host):
    from measure.models.adapter import load

    adapter = load(host, objective=0)
    before = {n: p.detach().clone() for n, p in adapter.model.named_parameters()}
    key = ["head_L5_H3"]
    twins = data.twins("train", 0, "politeness", 8, host)
    s = dict(plant.SETTINGS, epochs=2, batch_pairs=4, learning_rate=5e-3)
    stream = plant.lower_stream(adapter, plant.sequences(twins), 4)
    with torch.no_grad():
        r0 = plant.top_rewards(adapter, stream, 4)
    plant.fit(adapter, twins, key, s, seed=0)
    with torch.no_grad():
        r1 = plant.top_rewards(adapter, stream, 4)
    assert float((r1[0::2] - r1[1::2]).mean()) > float((r0[0::2] - r0[1::2]).mean())
    masks = plant.key_masks(adapter.model, key, adapter.head_dim)
    rows = slice(3 * adapter.head_dim, 4 * adapter.head_dim)
    assert masks["bert.encoder.layer.5.attention.self.query.weight"][rows].all()
    assert not masks["bert.encoder.layer.5.attention.self.query.weight"][:rows.start].any()
    for name, p in adapter.model.named_parameters():
        changed = p.detach() != before[name]
        if name in masks:
            assert not (changed & (masks[name] == 0)).any(), name
        else:
            assert not changed.any(), name
    a, pr = score.blind_rows(adapter, data.twins("study", 0, "politeness", 4, host), 4)
    assert len(a) == len(pr) == 4 * 26 and {r["mode"] for r in pr} == {"mean"}


BUNDLE = study.ROOT / "bundles" / "transfer"


def test_the_committed_keys_are_the_unblinding_record_s_and_the_reference_is_the_routed_bundle_s():
    import json

    from measure.studies.transfer import result

    record = json.loads((study.MODELS / "unblinded.json").read_text(encoding="utf-8"))
    committed = json.loads((BUNDLE / "key.json").read_text(encoding="utf-8"))
    assert committed == json.loads(json.dumps(result.key_doc(record)))
    assert committed["reference"]["gaps"] == result.reference_gaps()
    assert committed["reference"]["bound"] == result.BOUND == 0.06   # registrations/transfer-equivalence.yaml
    salt = bytes.fromhex(record["salt"])
    assert hashlib.sha256(salt).hexdigest() == json.loads((study.MODELS / "commitment.json").read_text())["salt_sha256"]
    for name, o in committed["organisms"].items():
        assert o["key"] == study.draw_key(int(name[5:]), salt, plant.SETTINGS)
