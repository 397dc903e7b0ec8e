"""Recompute the committed planted bundle's `key_recovery` block (golden.json) and its
spec_curve.jsonl from its committed rows with this checkout's bundle_kit/keyrecovery.py, intervals
included, and compare them byte for byte with the committed ones (as the study writes them,
measure/runner/jsonio.py). A refactor of keyrecovery.py must keep both equal.

Usage: python benchmarks/keyrecovery_rerun.py [BUNDLE]   (default bundles/planted-v2; about a
minute on one core). Exit status 0 when both are equal, 1 otherwise.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bundle_kit import keyrecovery  # noqa: E402
from measure.runner.jsonio import json_text, jsonl_text  # noqa: E402


def rows(folder: Path, name: str) -> list[dict]:
    with open(folder / name, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main(argv: list[str]) -> int:
    folder = ROOT / (argv[0] if argv else "bundles/planted-v2")
    attribution = rows(folder, "attribution_per_pair.jsonl") + rows(folder, "heads_attribution_per_pair.jsonl")
    patching = rows(folder, "patching_per_pair.jsonl") + rows(folder, "heads_patching_per_pair.jsonl")
    key = json.loads((folder / "key.json").read_text(encoding="utf-8"))
    committed = json.loads((folder / "golden.json").read_text(encoding="utf-8"))["key_recovery"]
    block = keyrecovery.summary(attribution, patching, key)
    same_block = json_text(block) == json_text(committed)
    curve = jsonl_text(keyrecovery.spec_rows(keyrecovery.pair_table(attribution, patching), key))
    same_curve = curve == (folder / keyrecovery.SPEC_FILE).read_text(encoding="utf-8")
    print(f"key_recovery block: {'identical' if same_block else 'DIFFERS'}; "
          f"{keyrecovery.SPEC_FILE}: {'identical' if same_curve else 'DIFFERS'}")
    return 0 if same_block and same_curve else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
