"""A study's stages in a row: `run_study(config, hooks)` plans it, measures its shards
(resuming from completed ones), then the shards of its second stage if its definition has one,
and writes its bundle (measure/runner/study.py, bundle.py)."""
from __future__ import annotations

from measure.runner.bundle import write_bundle
from measure.runner.config import Hooks, StudyConfig
from measure.runner.study import measure_shards, plan_study, second_stage


def measure_stages(plan, measure, hooks: Hooks) -> dict[str, int]:
    """Measure the plan's shards with `measure(plan, hooks)`, then its second stage's, if any;
    the counts summed over both."""
    counts = measure(plan, hooks)
    followup = second_stage(plan)
    if followup is not None:
        more = measure(followup, hooks)
        counts = {k: counts[k] + more[k] for k in counts}
    return counts


def run_study(config: StudyConfig, hooks: Hooks | None = None) -> dict:
    """Plan, measure and write one study; the result of `write_bundle`."""
    hooks = hooks or Hooks()
    plan = plan_study(config)
    counts = measure_stages(plan, measure_shards, hooks)
    return write_bundle(plan, counts, hooks)
