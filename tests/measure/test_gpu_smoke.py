"""benchmarks/gpu_smoke.sh in its --tiny CPU mode: the same script a GPU machine runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]


def test_gpu_smoke_tiny_agrees_and_reports_throughput(tmp_path):
    out = tmp_path / "smoke.json"
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_smoke.sh"), "--tiny", "--json", str(out)],
                          capture_output=True, text=True, env=dict(os.environ, PY=sys.executable), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ": agree" in proc.stdout
    numbers = json.loads(out.read_text())
    assert numbers["agree"] and numbers["largest_disagreement"] <= 1e-5
    assert numbers["layer_evals_per_s"] > 0 and numbers["flops_model"] > 0


def test_gpu_smoke_refuses_layers_the_model_lacks():
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_smoke.sh"), "--config",
                           str(REPO / "models" / "organism" / "config.json"), "--device", "cpu",
                           "--dtype", "float32", "--layers", "0,9"],
                          capture_output=True, text=True, env=dict(os.environ, PY=sys.executable), timeout=300)
    assert proc.returncode == 2 and "has 4 layers" in proc.stderr
