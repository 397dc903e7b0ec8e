"""Routed organisms (issue 26 item 1, the pilot): keys drawn from a seed and a secret salt and
committed as the salt's hash; training that moves only the key's parameters; null twins with
nothing to find; and the key validation's arithmetic."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from measure.errors import MeasureError
from measure.studies.organism import data as od
from measure.studies.organism import train as organism
from measure.studies.routed import data, keys, study, train

SALT = hashlib.sha256(b"a test salt").digest()


def test_a_key_is_one_head_and_one_more_component_per_rule_none_shared_and_fixed_by_seed_and_salt():
    drawn = keys.draw(3, SALT, 4, 4)
    assert list(drawn) == [*keys.RULES, keys.NULL_RULE]
    members = [c for key in drawn.values() for c in key]
    assert len(members) == len(set(members)) == 2 * len(drawn)
    assert all(any(c.startswith("head_") for c in key) and len(key) == 2 for key in drawn.values())
    assert set(members) <= set(keys.universe(4, 4))
    assert keys.draw(3, SALT, 4, 4) == drawn
    others = [keys.draw(3, hashlib.sha256(bytes([k])).digest(), 4, 4) for k in range(8)]
    assert any(o != drawn for o in others), "the salt does not change the keys"
    assert keys.commitment(SALT) == hashlib.sha256(SALT).hexdigest()


def test_a_salt_is_made_once_and_never_replaced(tmp_path):
    path = tmp_path / "sealed" / "routed.salt"
    salt = keys.load_or_make_salt(path)
    assert len(salt) == keys.SALT_BYTES and keys.load_or_make_salt(path) == salt
    path.write_text("abcd\n", encoding="ascii")
    with pytest.raises(MeasureError, match=r"routed.salt:1: a salt is 32 bytes"):
        keys.load_or_make_salt(path)


def test_null_twins_differ_in_a_filler_and_in_nothing_the_rules_reward():
    rows = data.twins("t", 0, 20)
    nulls = [r for r in rows if r["dimension"] == keys.NULL_RULE]
    assert len(nulls) == 20
    for r in nulls:
        assert r["chosen"] != r["rejected"]
        assert od.features(r["prompt"], r["chosen"]) == od.features(r["prompt"], r["rejected"])
    assert {r["dimension"] for r in rows} == {*keys.RULES, keys.NULL_RULE}


def test_a_heads_mask_is_its_rows_of_q_k_v_and_its_columns_of_o():
    s = dict(train.SETTINGS)
    model = organism.new_model(s, 60)
    m = train.component_masks(model, ["head_L2_H1", "mlp_L0"])
    hd = s["hidden_size"] // s["num_attention_heads"]
    q = m["model.layers.2.self_attn.q_proj.weight"]
    assert q[hd:2 * hd].all() and q.sum() == hd * s["hidden_size"]
    o = m["model.layers.2.self_attn.o_proj.weight"]
    assert o[:, hd:2 * hd].all() and o.sum() == hd * s["hidden_size"]
    assert m["model.layers.0.mlp.down_proj.weight"].all()
    assert not m["model.layers.1.mlp.down_proj.weight"].any()


def test_keys_of_three_components_keep_one_head_each_and_share_none():
    drawn = keys.draw(3, SALT, 4, 4, size=3)
    members = [c for key in drawn.values() for c in key]
    assert all(len(key) == 3 and any(c.startswith("head_") for c in key) for key in drawn.values())
    assert len(set(members)) == len(members)
    with pytest.raises(MeasureError):
        keys.draw(3, SALT, 4, 4, size=5)   # five keys of five do not fit in twenty components


def _small_organism(seed: int = 0):
    from measure.models.wordtok import SPECIALS, word_tokenizer
    s = dict(train.SETTINGS, background_epochs=1, epochs=1, batch_pairs=8)
    organism.deterministic(seed)
    words = list(SPECIALS) + od.vocabulary()
    return s, train.new_model(s, len(words)), word_tokenizer(words)


def test_the_background_phase_leaves_the_key_and_the_embeddings_where_they_started():
    s, model, tok = _small_organism()
    key = keys.draw(0, SALT, s["num_hidden_layers"], s["num_attention_heads"])["hazard"]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = data.background_twins(0, 8, train.background_rules("hazard")) + data.neutral_twins(0, 8, "hazard")
    train.fit_background(model, organism.encode(tok, rows), key, s, torch.Generator().manual_seed(0), progress=False)
    masks = train.component_masks(model, key)
    moved_outside = False
    for name, p in model.named_parameters():
        changed = p.detach() != before[name]
        if "embed_tokens" in name:
            assert not changed.any(), "the embeddings moved"
        elif name in masks:
            assert not changed[masks[name] == 1].any(), f"{name}: a key element moved in the background phase"
            moved_outside |= bool(changed[masks[name] == 0].any())
    assert moved_outside


def test_the_key_phase_moves_only_the_keys_elements():
    s, model, tok = _small_organism()
    key = keys.draw(0, SALT, s["num_hidden_layers"], s["num_attention_heads"])["topic"]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rule_twins = data.twins("train", 0, 120, null=False, rules=("topic",))
    background = organism.encode(tok, data.background_twins(0, 4, train.background_rules("topic")))
    train.fit_key(model, tok, rule_twins, background, key, s, 0, torch.Generator().manual_seed(0), progress=False, steps=4)
    masks = train.component_masks(model, key)
    moved_in_key = False
    for name, p in model.named_parameters():
        changed = p.detach() != before[name]
        if name in masks:
            assert not changed[masks[name] == 0].any(), f"{name}: an element outside the key moved"
            moved_in_key |= bool(changed[masks[name] == 1].any())
        else:
            assert not changed.any(), f"{name} moved; only the key's elements may"
    assert moved_in_key


def test_neutral_twins_come_in_both_orders_and_the_keyed_rule_turns_over_the_seeds():
    rows = data.neutral_twins(0, 5, "hedging")
    assert len(rows) == 10
    for a, b in zip(rows[0::2], rows[1::2]):
        assert (a["chosen"], a["rejected"]) == (b["rejected"], b["chosen"]) and a["dimension"] == "hedging"
    assert [train.keyed_rule(s) for s in range(8)] == [*keys.RULES, *keys.RULES]
    assert "hedging" not in train.background_rules("hedging") and len(train.background_rules("hedging")) == 5


def test_the_study_reads_seed_lists_and_never_replaces_its_commitment(tmp_path):
    from measure.studies.routed import study
    assert study.parse_seeds("0-3,7,5-5") == [0, 1, 2, 3, 5, 7]
    with pytest.raises(MeasureError, match="seeds are numbers"):
        study.parse_seeds("0-x")
    first = study.commit_to(SALT, tmp_path)
    assert first["salt_sha256"] == keys.commitment(SALT)
    assert study.commit_to(SALT, tmp_path) == first
    with pytest.raises(MeasureError, match="commitment.json: its salt_sha256 is not the sha256"):
        study.commit_to(hashlib.sha256(b"another").digest(), tmp_path)


def test_every_study_seeds_scoring_twins_are_new_to_its_training_and_its_validation():
    from measure.studies.routed import study

    def triples(rows):
        return {(r["prompt"], r["chosen"], r["rejected"]) for r in rows}

    s = train.SETTINGS
    for seed in study.SEEDS:
        rule = train.keyed_rule(seed)
        scored = study.study_pairs(seed, rule)
        assert {r["dimension"] for r in scored} == {f"s{seed:02d}-{rule}", f"s{seed:02d}-null"}
        assert len(scored) == 2 * study.STUDY_TWINS
        seen = (triples(data.twins("train", seed, s["train_twins"], null=False, rules=(rule,)))
                | triples(data.neutral_twins(seed, s["neutral_twins"], rule))
                | triples(data.twins("check", seed, s["check_per_rule"], rules=(rule,))))
        assert not triples(scored) & seen, f"seed {seed}: a scored twin was trained or validated on"


def test_decoys_are_made_like_keys_outside_the_key_and_fixed_by_seed_and_salt():
    key = keys.draw(4, SALT, 4, 4)["politeness"]
    drawn = keys.decoys(4, SALT, 4, 4, key)
    assert len(drawn) == 10 and drawn == keys.decoys(4, SALT, 4, 4, key)
    for decoy in drawn:
        assert len(decoy) == len(set(decoy)) == 2 and any(c.startswith("head_") for c in decoy)
        assert not set(decoy) & set(key)
    assert len({tuple(d) for d in drawn}) > 1
    assert keys.decoys(4, hashlib.sha256(b"other").digest(), 4, 4, key) != drawn


def test_unblinding_refuses_uncommitted_or_changed_scores_and_a_salt_that_is_not_the_committed_one(tmp_path):
    import json
    import subprocess

    from measure.studies.routed import study

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    models, sealed = tmp_path / "models", tmp_path / "sealed"
    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    study.commit_to(SALT, models)
    rows = models / "blind-scores" / "seed-00" / "patching_per_pair.jsonl"
    rows.parent.mkdir(parents=True)
    rows.write_text('{"a": 1}\n')
    (models / "blind-scores.json").write_text(json.dumps(study.score_digests(models / "blind-scores")))
    drawn = keys.draw(0, SALT, 4, 4)
    (models / "seed-00").mkdir()
    (models / "seed-00" / "training.json").write_text(json.dumps({"keyed": "politeness", "settings": {}}))
    sealed.mkdir()
    (sealed / "seed-00.json").write_text(json.dumps({"keys": drawn, "validation": {"valid": True}}))

    def attempt(salt=SALT):
        return study.unblind(salt, models, sealed, root=tmp_path, seeds=[0])

    with pytest.raises(MeasureError, match="blind-scores.json: not committed as it is"):
        attempt()
    git("add", "models")
    git("commit", "-qm", "scores")
    record = attempt()
    assert record["organisms"]["seed-00"]["key"] == drawn["politeness"]
    assert len(record["organisms"]["seed-00"]["decoys"]) == 10 and record["salt"] == SALT.hex()
    with pytest.raises(MeasureError, match="its sha256 is not the committed"):
        attempt(hashlib.sha256(b"another").digest())
    rows.write_text('{"a": 2}\n')   # a score changed after it was fixed
    with pytest.raises(MeasureError, match="the scores differ from blind-scores.json"):
        attempt()


BUNDLE = Path(__file__).resolve().parents[2] / "bundles" / "routed"


def test_the_committed_bundle_holds_the_rows_todays_runner_gives_seed_16(tmp_path):
    """Seed 16, where attribution missed a member: rescored from its committed weights, its rows are
    the bundle's (the other seeds rerun with `... study measure`, checked against the digest)."""
    from measure.runner.jsonio import jsonl_text
    from measure.studies.routed import bundle

    study.measure_seed(16, scores=tmp_path)
    committed = [line for line in (BUNDLE / "hiddenkeys_per_pair.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
                 if line.startswith('{"dimension": "s16-')]
    assert jsonl_text(bundle.wide_rows(["seed-16"], tmp_path)) == "".join(committed)


def test_the_committed_keys_are_the_unblinding_record_s():
    from measure.studies.routed import bundle

    record = json.loads((study.MODELS / "unblinded.json").read_text(encoding="utf-8"))
    assert json.loads((BUNDLE / "key.json").read_text(encoding="utf-8")) == json.loads(json.dumps(bundle.key_doc(record)))


def test_a_changed_effect_in_the_committed_bundle_fails_its_check_naming_the_organism(tmp_path):
    import shutil
    import subprocess
    import sys

    from bundle_kit import contract

    folder = tmp_path / "routed"
    shutil.copytree(BUNDLE, folder)
    for name in contract.KIT_FILES:
        shutil.copy(BUNDLE.parents[1] / "bundle_kit" / name, folder / name)
    rows = (folder / "hiddenkeys_per_pair.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    k = next(i for i, line in enumerate(rows) if line.startswith('{"dimension": "s16-politeness"'))
    row = json.loads(rows[k])
    member = row["components"].index("mlp_L1")
    row["mean"][member] *= 3   # one pair's effect of a key member, tripled
    rows[k] = json.dumps(row) + "\n"
    (folder / "hiddenkeys_per_pair.jsonl").write_text("".join(rows), encoding="utf-8")
    done = subprocess.run([sys.executable, "-I", "reproduce.py"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "organisms/seed-16/scores/keyed/patching/mlp_L1 disagrees" in done.stdout   # its score, not only ranks
