"""bfloat16, the dtype the 8B reward models run in on a GPU, runs end to end here on the CPU."""
from __future__ import annotations

import json
import math

from measure.runner.config import StudyConfig
from measure.runner.run import run_study


def test_bfloat16_study_runs_and_records_its_dtype(tiny_dir, tiny_pairs, tmp_path):
    result = run_study(StudyConfig(model=str(tiny_dir), study="tiny", out=tmp_path / "bundle",
                                   pairs_file=tiny_pairs, key_file=None, runs_dir=tmp_path / "runs",
                                   shard_size=4, progress=False, dtype="bfloat16"))
    golden = json.loads((tmp_path / "bundle" / "golden.json").read_text())
    assert result["manifest"]["dtype"] == "bfloat16"
    assert golden["per_dimension_rho"] and all(math.isfinite(r) for r in golden["per_dimension_rho"].values())
    margins = [json.loads(line)["margin"] for line in (tmp_path / "bundle" / "attribution_per_pair.jsonl").open()]
    assert margins and all(math.isfinite(m) for m in margins)
