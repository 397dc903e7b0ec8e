"""Stage 3 of a study: write the bundle folder as a whole and swap it into place.

Every file is written into a staging folder beside `bundles/<study>/` (same file system), which
then replaces the old folder in one step (`safe_io.replace_dir`). A run killed at any point
leaves the previous good bundle intact in place; a leftover staging folder is removed by the
next run. Files in the old folder that the measurement stage does not write (`CORRECTIONS.md`,
kept by hand) are carried into the new one unchanged.
"""
from __future__ import annotations

import json
import shutil
import sys
import time

from bundle_kit import contract
from safe_io import replace_dir, staging_dir, write_atomic

from measure.runner.config import Hooks
from measure.runner.jsonio import json_text, jsonl_text, read_jsonl
from measure.runner.outfolder import check_replaceable
from measure.runner.study import Plan, joined_rows, shown, versions

# The files a run writes whatever its reads: every `*_per_pair.jsonl` is a run's too, so an old
# bundle's rows of a read this run does not make are never carried over; anything else is.
WRITTEN = (contract.PAIRS, contract.KEY, contract.GOLDEN, contract.README, contract.MANIFEST)
ROWS_SUFFIX = "_per_pair.jsonl"


def _rows(plan: Plan) -> dict[str, list[dict]]:
    """Every stage's rows by kind, each kind reduced as the study writes it."""
    rows = joined_rows(plan)
    if plan.followup is not None:
        rows.update(joined_rows(plan.followup))
    return {name: plan.definition.reduce(name, kept) for name, kept in rows.items()}


def _carry_over(old, staging) -> None:
    """Copy everything of the old bundle that this run does not write (dot-files included, links
    as links) into the staging folder, so the swap loses nothing."""
    if not old.is_dir():
        return
    for path in sorted(old.iterdir()):
        if path.name in WRITTEN or path.name.endswith(ROWS_SUFFIX) or (staging / path.name).exists():
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.copytree(path, staging / path.name, symlinks=True)
        else:
            shutil.copy2(path, staging / path.name, follow_symlinks=False)


def write_bundle(plan: Plan, counts: dict[str, int], hooks: Hooks | None = None) -> dict:
    """Stage 3: the bundle from the shards' rows, the study's own files and summary, the
    manifest; written in a staging folder and swapped in whole. The run's result."""
    hooks = hooks or Hooks()
    config, adapter = plan.config, plan.adapter
    out = check_replaceable(config.bundle_dir)  # again: the folder may have changed during the run
    staging = staging_dir(out)

    def put(name: str, text: str) -> None:
        write_atomic(staging / name, text)
        hooks.file_staged(name)

    rows = _rows(plan)
    for name, filename in plan.all_files.items():
        put(filename, jsonl_text(rows[name]))
    put(contract.PAIRS, plan.pairs_text)
    written = {name: read_jsonl(staging / filename) for name, filename in plan.all_files.items()}
    if plan.key is not None:
        put(contract.KEY, json_text(plan.key))
    for name, text in plan.definition.extra_files(plan).items():
        put(name, text)
    summary = plan.definition.finish(plan, staging, written, put)
    training = plan.source.training
    manifest = {
        "study": config.study, **plan.identity,
        "model_config": dict(json.loads(adapter.model.config.to_json_string(use_diff=False)),
                             _name_or_path=adapter.model_id),  # not this machine's path
        "seeds": {"torch": config.seed, "pairs_generator": f"see {shown(training)}" if training else None,
                  "bootstrap": 0},
        "data_file": shown(plan.pairs_file),
        "packages": versions(), "device": str(adapter.device), "threads": config.threads,
        "numerics": plan.numerics,
        "shard_size": config.shard_size, "patch_heads": config.patch_heads,
        "shards": len(plan.shards), "shards_resumed": counts["resumed"],
        "run_fingerprint": plan.fingerprint, "git": plan.git,
        "wall_time_s": round(time.time() - plan.started, 3),
        # the arguments only: the interpreter's path would name this machine's folders
        "command": "python -m measure " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("__main__.py") else None,
    }
    put(contract.MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    _carry_over(out, staging)
    replace_dir(staging, out)
    return {"out": out, "golden": summary, "manifest": manifest, **counts}
