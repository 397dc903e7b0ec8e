"""The MiniLM study through the common runner against its own loop before the move, row for row.

    .venv/bin/python benchmarks/compare_minilm_runner.py [--max-pairs 1] [--dimensions a,b] [--commit eb5601b]

Loads the study module of `--commit` (the last one with the MiniLM study's own shard loop) from
git, measures the same pairs with its `measure()` in this process, runs
`python -m measure run --model minilm --study minilm-balanced` with the same `--max-pairs` into a
temporary folder, and compares every per-pair file line by line. Both run in the portable
numerics mode. Prints the number of rows, of differing rows, of differing fields by name, and the
largest difference of each.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from measure import numerics  # noqa: E402

numerics.set_environment()


def old_module(commit: str, folder: Path):
    source = subprocess.run(["git", "show", f"{commit}:measure/studies/minilm/study.py"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    path = folder / "measure" / "studies" / "minilm" / "old_study.py"  # its REPO is parents[3]
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_minilm_study", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-pairs", type=int, default=1, help="rows per dimension and fold")
    parser.add_argument("--dimensions", default=None, help="comma-separated subset of dimensions")
    parser.add_argument("--commit", default="eb5601b", help="the commit whose MiniLM loop is compared")
    parser.add_argument("--new", type=Path, default=None,
                        help="a bundle the runner already wrote with this --max-pairs (skips the run)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="compare_minilm_"))
    new = args.new or tmp / "new"
    done = None if args.new else subprocess.run([sys.executable, "-m", "measure", "run", "--model", "minilm", "--study", "minilm-balanced",
                           "--max-pairs", str(args.max_pairs), "--out", str(tmp / "new"),
                           "--runs-dir", str(tmp / "runs"), "--no-progress",
                           *(["--dimensions", args.dimensions] if args.dimensions else [])],
                          cwd=REPO, capture_output=True, text=True)
    if done is not None and done.returncode != 0:
        sys.exit(f"the runner failed: {done.stderr.strip().splitlines()[-1:]}")

    import torch

    from measure.models.adapter import Adapter
    from measure.runner.jsonio import jsonl_text, read_jsonl
    from measure.runner.study import setup_determinism
    from measure.studies.minilm import model as minilm

    old = old_module(args.commit, tmp)
    setup_determinism(0, 1, "cpu")
    model, tokenizer = minilm.load_model()
    adapter = Adapter(model, tokenizer, "minilm", path=minilm.MODEL_DIR)
    pairs = read_jsonl(new / "pairs.jsonl")
    with torch.no_grad():
        rows = old.measure(adapter, pairs, old.reads(model, pairs), progress=False)
    total, differ, fields, largest = 0, 0, Counter(), {}
    for name, filename in old.FILES.items():
        if name == "heldout":
            continue
        before = jsonl_text(rows[name]).splitlines()
        after = (new / filename).read_text(encoding="utf-8").splitlines()
        if len(before) != len(after):
            sys.exit(f"{filename}: {len(before)} rows before, {len(after)} after")
        for a, b in zip(before, after):
            total += 1
            if a != b:
                differ += 1
                ra, rb = json.loads(a), json.loads(b)
                for k in ra:
                    if ra[k] != rb.get(k):
                        fields[k] += 1
                        if isinstance(ra[k], float) and isinstance(rb.get(k), float):
                            largest[k] = max(largest.get(k, 0.0), abs(ra[k] - rb[k]))
    print(f"{len(pairs)} pairs, {total} rows: {differ} differ" + (f"; fields: {dict(fields)}" if differ else ""))
    if largest:
        print("largest differences: " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(largest.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
