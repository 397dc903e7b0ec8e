"""The committed trained-organism study comes out of today's code byte for byte.

The bundles are registered and reproduced data: a code change that moves any committed number,
even in its last digit, must show up here rather than in the next author's rerun. The rows are
made in the portable numerics mode (`measure/numerics.py`), so they hold on any x86-64 CPU.

Split so that no test runs long: the shards, a fifth of them per test, are measured in this
process (in the mode, `tests/measure/conftest.py`) and compared with the committed rows of their
pairs; the bundle stage writes `golden.json`, the README, the key and the pairs from the committed
rows. `benchmarks/benchmark_numerics.py` reruns the whole study from the command line as well.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bundle_kit import contract
from measure.runner.bundle import write_bundle
from measure.runner.config import StudyConfig
from measure.runner.jsonio import jsonl_text
from measure.runner.study import FILES, clean_stats, measure_shard, plan_study

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "bundles" / "organism"
GROUPS = 5
WRITTEN = ("pairs.jsonl", "key.json", "golden.json", "README.md")


def _committed_lines() -> dict[str, list[tuple[str, str]]]:
    """{file name: [(pair_id, line), ...] in file order} of the committed per-pair files."""
    return {filename: [(json.loads(line)["pair_id"], line)
                       for line in (BUNDLE / filename).read_text(encoding="utf-8").splitlines(keepends=True)]
            for filename in FILES.values()}


def _shard_lines(committed, filename: str, plan, k: int) -> list[str]:
    """The committed lines of shard k's pairs, in file order (a shard's rows are one block)."""
    ids = {plan.pairs[i]["pair_id"] for i in plan.shards[k]}
    return [line for pair_id, line in committed[filename] if pair_id in ids]


@pytest.fixture(scope="module")
def organism(tmp_path_factory):
    plan = plan_study(StudyConfig(model="organism", study="organism", progress=False,
                                  runs_dir=tmp_path_factory.mktemp("runs")))
    return plan, clean_stats(plan), _committed_lines()


def test_the_plan_reads_the_committed_pairs_and_key(organism):
    plan, _, _ = organism
    assert plan.pairs_text == (BUNDLE / contract.PAIRS).read_text(encoding="utf-8")
    assert plan.key == json.loads((BUNDLE / contract.KEY).read_text(encoding="utf-8"))


@pytest.mark.parametrize("group", range(GROUPS))
def test_every_shard_reruns_to_the_committed_rows(organism, group):
    plan, stats, committed = organism
    for k in range(group, len(plan.shards), GROUPS):
        rows = measure_shard(plan, stats, k)
        for name, filename in FILES.items():
            expected = "".join(_shard_lines(committed, filename, plan, k))
            assert jsonl_text(rows[name]) == expected, f"shard {k}: {filename}"


def test_the_bundle_stage_writes_the_committed_summary_from_the_committed_rows(tmp_path):
    plan = plan_study(StudyConfig(model="organism", study="organism", progress=False,
                                  out=tmp_path / "organism", runs_dir=tmp_path / "runs"))
    committed = _committed_lines()
    for k in range(len(plan.shards)):
        rows = {name: [json.loads(line) for line in _shard_lines(committed, filename, plan, k)]
                for name, filename in FILES.items()}
        plan.shard_path(k).parent.mkdir(parents=True, exist_ok=True)
        plan.shard_path(k).write_text(json.dumps(rows) + "\n", encoding="utf-8")
    write_bundle(plan, {"computed": 0, "resumed": len(plan.shards)})
    for name in [*FILES.values(), *WRITTEN]:
        assert (tmp_path / "organism" / name).read_bytes() == (BUNDLE / name).read_bytes(), name
