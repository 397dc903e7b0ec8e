"""The realprefs bundle at full size, before a trained model exists: its bytes and its check's time.

Runs the realprefs study through the common runner, with every default (500 instrument pairs per
objective, every evaluation pair scored, 100 null directions), on a random model of the realprefs
model's shape in everything that sets the bundle's rows (6 layers of 12 heads, three objective
heads, the MiniLM tokenizer and the 128-token budget) but narrow (hidden 48), so the run takes
minutes instead of hours; the baselines' held-out margins are random stand-ins. Then prints each
bundle file's size and the total against the 20 MB budget, and times the bundle's own check
(`reproduce.py`, from bundle_kit, as the zip ships it) in a fresh interpreter, against its 10 s
budget. The numbers are random; only the sizes and the time mean anything.

    .venv/bin/python benchmarks/benchmark_realprefs_bundle.py [--out DIR] [--max-pairs N]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from measure import numerics  # noqa: E402

numerics.set_environment()


def shaped_model(folder: Path) -> Path:
    """A random MiniLMRewardModel: 6 layers of 12 heads, hidden 48, the trunk's tokenizer."""
    import torch

    from measure.models.pooled_heads import BertConfig, MiniLMRewardModel
    from measure.studies.minilm import model as minilm

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=48, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=96, max_position_embeddings=512)
    config.objectives, config.folds = ["helpfulness", "harmlessness", "summary"], 0
    config.architectures = ["MiniLMRewardModel"]
    model = MiniLMRewardModel(config).eval()
    with torch.no_grad():
        model.heads.weight.normal_(0, 1.0)
    model.save_pretrained(folder)
    for name in minilm.TRUNK_FILES:
        shutil.copyfile(minilm.trunk_dir() / name, folder / name)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--max-pairs", type=int, default=None, help="instrument pairs per objective (default 500)")
    args = parser.parse_args()
    from bundle_kit import contract
    from measure.runner.config import StudyConfig
    from measure.runner.run import run_study
    from measure.studies.realprefs import heldout

    work = args.out or Path(tempfile.mkdtemp(prefix="realprefs-bundle-"))
    work.mkdir(parents=True, exist_ok=True)
    heldout.BASELINE_ROWS = heldout.stand_in_baselines(work / "baselines_eval.jsonl")
    model = shaped_model(work / "model")
    started = time.time()
    result = run_study(StudyConfig(model=str(model), study="realprefs", out=work / "bundle", max_pairs=args.max_pairs,
                                   runs_dir=work / "runs", progress=True))
    print(f"study: {time.time() - started:.0f} s wall ({result['computed']} shards)")
    bundle = result["out"]
    sizes = {p.name: p.stat().st_size for p in sorted(bundle.iterdir()) if p.is_file()}
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"  {name:32} {size:>12,}")
    total = sum(sizes.values())
    print(f"  {'total':32} {total:>12,}  ({total / 1e6:.2f} MB of 20)")
    for kit in contract.KIT_FILES:
        shutil.copy(REPO / "bundle_kit" / kit, bundle / kit)
    t0 = time.time()
    check = subprocess.run([sys.executable, "-I", str(bundle / "reproduce.py")], capture_output=True, text=True)
    seconds = time.time() - t0
    print(check.stdout[-600:] + check.stderr[-600:])
    print(f"reproduce.py: exit {check.returncode}, {seconds:.1f} s wall (budget 10 s)")
    return 0 if check.returncode == 0 and total <= 20_000_000 else 1


if __name__ == "__main__":
    sys.exit(main())
