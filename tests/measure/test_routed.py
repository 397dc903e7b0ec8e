"""Routed organisms (issue 26 item 1, the pilot): keys drawn from a seed and a secret salt and
committed as the salt's hash; training that moves only the key's parameters; null twins with
nothing to find; and the key validation's arithmetic."""
from __future__ import annotations

import hashlib

import pytest
import torch

from measure.errors import MeasureError
from measure.studies.organism import data as od
from measure.studies.organism import train as organism
from measure.studies.routed import data, keys, train

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


def test_training_moves_only_the_keys_parameters_each_by_its_own_rules_batches():
    s = dict(train.SETTINGS, epochs=1, batch_pairs=8)
    organism.deterministic(0)
    from measure.models.wordtok import SPECIALS, word_tokenizer
    words = list(SPECIALS) + od.vocabulary()
    model = organism.new_model(s, len(words))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    drawn = keys.draw(0, SALT, s["num_hidden_layers"], s["num_attention_heads"])
    rows = data.twins("train", 0, 16, null=False)
    tok = word_tokenizer(words)
    encoded = {rule: organism.encode(tok, [r for r in rows if r["dimension"] == rule]) for rule in keys.RULES}
    train.fit(model, encoded, drawn, s, 0, progress=False, steps=6)
    _moved_only_in_keys(model, before, drawn)
    # the null rule's decoy key is never trained
    decoy = train.component_masks(model, drawn[keys.NULL_RULE])
    for name, mask in decoy.items():
        p = dict(model.named_parameters())[name]
        assert torch.equal(p.detach()[mask == 1], before[name][mask == 1])


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


def test_the_isolated_design_trains_only_the_keys_after_the_background_phase():
    """The isolated design's second phase moves only the keyed rules' components (the background,
    trained first, stays as it was; so does the null rule's decoy)."""
    from measure.models.wordtok import SPECIALS, word_tokenizer
    s = dict(train.SETTINGS, epochs=1, batch_pairs=8, background_epochs=0, design="isolated")
    organism.deterministic(0)
    words = list(SPECIALS) + od.vocabulary()
    model = organism.new_model(s, len(words))
    tok = word_tokenizer(words)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    drawn = keys.draw(0, SALT, s["num_hidden_layers"], s["num_attention_heads"])
    rows = data.twins("train", 0, 16, null=False)
    background = organism.encode(tok, data.background_twins(0, 16, train.BACKGROUND_RULES))
    train.fit_isolated(model, tok, rows, background, drawn, s, 0, progress=False, steps=3)
    _moved_only_in_keys(model, before, drawn)


def _moved_only_in_keys(model, before: dict, drawn: dict) -> None:
    """Some key element moved, and nothing outside the rules' keys did."""
    union = train.component_masks(model, [c for rule in keys.RULES for c in drawn[rule]])
    moved_in_key = False
    for name, p in model.named_parameters():
        changed = p.detach() != before[name]
        if name in union:
            assert not changed[union[name] == 0].any(), f"{name}: an element outside every key moved"
            moved_in_key |= bool(changed[union[name] == 1].any())
        else:
            assert not changed.any(), f"{name} moved; only heads' and MLPs' key elements may"
    assert moved_in_key
