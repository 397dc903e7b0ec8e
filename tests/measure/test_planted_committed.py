"""The committed planted study (bundles/planted-v2/) comes out of today's code byte for byte.

One organism of each family is measured again here, shard by shard, through the common runner in
the portable numerics mode (tests/measure/conftest.py puts this process in it), and its rows are
compared with the committed rows of its pairs; the key and the key check come from the committed
construction. The whole study reruns with `python -m measure.studies.planted run --out DIR`.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundle_kit import contract
from measure.runner.config import StudyConfig
from measure.runner.jsonio import jsonl_text
from measure.runner.study import FILES, clean_stats, measure_shard, plan_study
from measure.studies.planted import organisms
from measure.studies.planted.study import combined_key

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "bundles" / "planted-v2"


def _committed(filename: str, organism: str) -> list[str]:
    return [line for line in (BUNDLE / filename).read_text(encoding="utf-8").splitlines(keepends=True)
            if json.loads(line)["model"] == organism]


@pytest.mark.parametrize("family,seed", [("shallow", 2), ("deep", 1), ("mid", 3)])
def test_an_organism_of_each_family_reruns_to_the_committed_rows(tmp_path, family, seed):
    folder = organisms.ensure_built(family, seed)
    organism = folder.name
    plan = plan_study(StudyConfig(model=str(folder), study=f"planted-v2-{organism}", pairs_file=folder / contract.PAIRS,
                                  runs_dir=tmp_path / "runs", progress=False))
    stats = clean_stats(plan)
    got = {name: [] for name in FILES}
    for k in range(len(plan.shards)):
        for name, rows in measure_shard(plan, stats, k).items():
            for row in rows:
                row["model"] = organism      # the study names each row's organism, as the bundle does
            got[name] += rows
    for name, filename in FILES.items():
        assert jsonl_text(got[name]) == "".join(_committed(filename, organism)), filename


def test_the_committed_key_is_the_construction_s():
    keys = [json.loads((organisms.organism_dir(f, s) / organisms.ANSWER_KEY).read_text(encoding="utf-8"))
            for f, s in organisms.ORGANISMS]
    committed = json.loads((BUNDLE / contract.KEY).read_text(encoding="utf-8"))
    assert committed == json.loads(json.dumps(combined_key(keys)))
    for key in keys:
        record = json.loads((organisms.organism_dir(key["family"], key["seed"]) / "construction.json").read_text())
        assert committed["organisms"][key["organism"]]["weights_sha256"] == record["weights_sha256"]
