"""Reads as part of the plan: a pair measured along several named directions, through the common
runner, with resume (measure/runner/reads.py, definition.py)."""
from __future__ import annotations

import json

import pytest
import torch

from measure.runner.config import Hooks, StudyConfig
from measure.runner.definition import Definition
from measure.runner.reads import Read
from measure.runner.run import run_study


class TwoReads(Definition):
    """Every pair along the score row given as per-pair directions (`own`) and along a seeded
    random unit direction (`random`, files `random_*`, mean mode only, no lens, no heads)."""

    def reads(self, adapter, pairs, config):
        n = len(pairs)
        own = adapter.w_r.detach().float().expand(n, -1).clone()
        g = torch.Generator().manual_seed(0)
        random = torch.randn(n, own.shape[1], generator=g)
        return [Read(name="own", directions=own, biases=torch.full((n,), float(adapter.score_bias))),
                Read(name="random", directions=random / random.norm(dim=-1, keepdim=True),
                     biases=torch.zeros(n), modes=("mean",), lens=False, heads=False, prefix="random_")]


@pytest.fixture
def two_reads(monkeypatch):
    import measure.runner.study as study
    monkeypatch.setattr(study, "definition_for", lambda name: TwoReads() if name == "two" else Definition())


def _config(tiny_dir, tiny_pairs, out, runs, study="two"):
    return StudyConfig(model=str(tiny_dir), study=study, out=out, pairs_file=tiny_pairs, runs_dir=runs,
                       shard_size=4, progress=False)


def _rows(folder, name):
    return [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines()]


def test_named_reads_write_their_rows_with_the_direction(two_reads, tiny_dir, tiny_pairs, tmp_path):
    out = tmp_path / "two"
    run_study(_config(tiny_dir, tiny_pairs, out, tmp_path / "runs"))
    names = sorted(p.name for p in out.iterdir())
    assert {"attribution_per_pair.jsonl", "heads_patching_per_pair.jsonl", "lens_per_pair.jsonl",
            "random_attribution_per_pair.jsonl", "random_patching_per_pair.jsonl"} <= set(names)
    assert "random_lens_per_pair.jsonl" not in names and "random_heads_patching_per_pair.jsonl" not in names
    own, random = _rows(out, "attribution_per_pair.jsonl"), _rows(out, "random_attribution_per_pair.jsonl")
    assert {r["direction"] for r in own} == {"own"} and {r["direction"] for r in random} == {"random"}
    assert list(own[0])[:5] == ["model", "dimension", "pair_id", "seed_id", "direction"]
    assert {r["mode"] for r in _rows(out, "random_patching_per_pair.jsonl")} == {"mean"}
    assert own[0]["margin"] != random[0]["margin"]


def test_the_score_row_as_a_named_read_measures_what_the_default_read_does(two_reads, tiny_dir, tiny_pairs, tmp_path):
    run_study(_config(tiny_dir, tiny_pairs, tmp_path / "two", tmp_path / "runs"))
    run_study(_config(tiny_dir, tiny_pairs, tmp_path / "plain", tmp_path / "runs", study="plain"))
    for name in ("attribution_per_pair.jsonl", "patching_per_pair.jsonl", "lens_per_pair.jsonl"):
        named, plain = _rows(tmp_path / "two", name), _rows(tmp_path / "plain", name)
        assert len(named) == len(plain) and "direction" not in plain[0]
        for a, b in zip(named, plain):
            assert a.pop("direction") == "own"
            for field, value in b.items():  # a per-row direction sums in another order: float32 digits (the tiny model's rewards cancel large terms)
                if isinstance(value, float):
                    assert a[field] == pytest.approx(value, rel=1e-3, abs=1e-4), (name, field)
                elif field != "offdist_flag":  # a flag can flip with a z at its threshold
                    assert a[field] == value, (name, field)


def test_a_run_with_named_reads_resumes_to_the_same_bytes(two_reads, tiny_dir, tiny_pairs, tmp_path):
    whole = tmp_path / "whole"
    run_study(_config(tiny_dir, tiny_pairs, whole, tmp_path / "runs_whole"))

    def stop(done, total):
        raise KeyboardInterrupt

    out, runs = tmp_path / "resumed", tmp_path / "runs"
    with pytest.raises(KeyboardInterrupt):
        run_study(_config(tiny_dir, tiny_pairs, out, runs), Hooks(shard_done=stop))
    result = run_study(_config(tiny_dir, tiny_pairs, out, runs))
    assert result["resumed"] == 1 and result["computed"] == 2
    for path in whole.iterdir():
        if path.name != "manifest.json":
            assert (out / path.name).read_bytes() == path.read_bytes(), path.name
