"""A study's three stages in a row: `run_study(config, hooks)` plans it, measures its shards
(resuming from completed ones) and writes its bundle (measure/runner/study.py, bundle.py)."""
from __future__ import annotations

from measure.runner.bundle import write_bundle
from measure.runner.config import Hooks, StudyConfig
from measure.runner.study import measure_shards, plan_study


def run_study(config: StudyConfig, hooks: Hooks | None = None) -> dict:
    """Plan, measure and write one study; the result of `write_bundle`."""
    hooks = hooks or Hooks()
    plan = plan_study(config)
    counts = measure_shards(plan, hooks)
    return write_bundle(plan, counts, hooks)
