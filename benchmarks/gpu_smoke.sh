#!/usr/bin/env bash
# Smoke run for a GPU machine: a random-weight Llama reward model of 8B shape, built from
# benchmarks/configs/llama-3.1-8b.json in bfloat16 on one GPU (nothing is downloaded), a few
# pairs and layers. Checks the sweep against the naive loop and prints throughput (layer
# evaluations/s, achieved TFLOP/s and efficiency under measure/runner/plan.py's FLOP model), so the
# plan's assumed GPU efficiency can be replaced by a measurement.
#
#   benchmarks/gpu_smoke.sh                      # cuda, bfloat16, 4 pairs, layers 0,15,31
#   benchmarks/gpu_smoke.sh --json smoke.json    # also write the numbers
#   benchmarks/gpu_smoke.sh --tiny               # a 4-layer hidden-64 model on the CPU (tests)
#   PY=/path/to/python benchmarks/gpu_smoke.sh --device cuda:1 --pairs 8 --layers 0,31
#
# Exit status: 0 when the sweep and the naive loop agree, 1 when they do not, 2 on bad input.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if [[ " $* " != *" --tiny "* ]] && command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
exec "$PY" benchmarks/gpu_smoke.py "$@"
