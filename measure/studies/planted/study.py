"""The planted study: twelve organisms measured with the repository's runner, one bundle.

`python -m measure.studies.planted run` builds any missing organism (checking its sha256), runs
the key check (`verify.py`), runs the common runner on each organism's study pairs
(attribution, patching of every attn and mlp block and every head in all three modes, the lens),
and merges the twelve runs into `bundles/planted-v2/`: one dimension per (organism, rule),
`shallow-s0-hazard` and so on, the `model` field naming the organism. Beside the runner's files
the bundle holds `key.json` (every organism's key), `key_check.json` (every check),
`spec_curve.jsonl` (the specification curve) and a `golden.json` with `key_check`,
`key_recovery` (bundle_kit/keyrecovery.py) and `validity`.
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

from bundle_kit import contract, keyrecovery
from measure import numerics
from measure.runner.config import REPO, StudyConfig
from measure.runner.jsonio import json_text, jsonl_text, read_jsonl
from measure.runner.readme import bundle_readme
from measure.runner.rows import attribution_gap
from measure.runner.run import run_study
from measure.runner.study import FILES, versions
from measure.runner.summary import golden
from measure.studies.planted import circuits, verify
from measure.studies.planted.design import FAMILIES
from measure.studies.planted.organisms import ANSWER_KEY, ORGANISMS, PLANTED_DIR, WEIGHTS_HASH, ensure_built
from safe_io import git_state, replace_dir, staging_dir, write_atomic

STUDY = "planted-v2"
UNIVERSE = "head and mlp components (every head and every MLP block: a partition of every write but the embedding's)"


def combined_key(keys: list[dict]) -> dict:
    """key.json of the bundle: every organism's key, the roles and the traps."""
    return {"construction": "hand-set weights (measure/studies/planted/weights.py) from a design "
                            "(design.py, circuits.py); every member, role and strength is written by the "
                            "code that sets the weights, nothing is measured to make the key",
            "universe": UNIVERSE,
            "strengths": {"shapley": "Shapley value in the interchange game: absent members behave as on "
                                     "an input without the word (neither scored method's intervention)",
                          "direct_share": "what the member writes into the reward at the scoring token on a "
                                          "clean input with the word (attribution's currency)",
                          "removal_effect": "the change in the rule's reward when the member alone is absent "
                                            "(single-component patching's currency)"},
            "keys": {"circuit": "every key member", "direct": "members with a nonzero direct share",
                     "single": "members with a nonzero removal effect"},
            "mechanisms": {name: {"aimed_at": spec[0], "why": spec[1],
                                  "members": [{"member": m.name, "kind": m.kind, "role": m.role, "key": m.key}
                                              for m in spec[2]]}
                           for name, spec in circuits.MECHANISMS.items()},
            "families": {f: {"layers": s["layers"], "heads": s["heads"], "rules": s["rules"]} for f, s in FAMILIES.items()},
            "organisms": {k["organism"]: {"family": k["family"], "seed": k["seed"],
                                          "weights_sha256": k["weights_sha256"], "channels": k["channels"]}
                          for k in keys},
            "dimensions": {d: spec for k in keys for d, spec in k["dimensions"].items()}}


def validity(key_check: dict, recovery: dict) -> dict:
    """The kill criterion of every record: the key check failed, or the background did not
    overlap the weakest key members."""
    overlaps = recovery["overlap"]["holds"]
    return {"key_check_passes": key_check["all_pass"], "background_overlaps": overlaps,
            "failed": int(not (key_check["all_pass"] and overlaps))}


def run(out: Path, runs_dir: Path | None = None, organisms=ORGANISMS, threads: int = 1,
        bootstrap: dict | None = None, progress: bool = False, root: Path = PLANTED_DIR) -> dict:
    """Measure every organism and write the bundle to `out` (swapped in whole)."""
    import torch

    started = time.time()
    head, dirty = git_state(REPO)
    mode = numerics.enter(threads)   # the key check runs before the runner enters the mode itself
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    folders = [ensure_built(f, s, root) for f, s in organisms]
    key_check = verify.verify_all(organisms, root)
    keys = [json.loads((f / ANSWER_KEY).read_text(encoding="utf-8")) for f in folders]
    files = {name: [] for name in FILES}
    pairs, identities = [], {}
    with tempfile.TemporaryDirectory(prefix="planted-study-") as tmp:
        for (family, seed), folder, key in zip(organisms, folders, keys):
            organism = key["organism"]
            result = run_study(StudyConfig(
                model=str(folder), study=f"{STUDY}-{organism}", out=Path(tmp) / organism,
                pairs_file=folder / contract.PAIRS, runs_dir=runs_dir,
                threads=threads, progress=progress))
            for name, filename in FILES.items():
                for row in read_jsonl(Path(tmp) / organism / filename):
                    row["model"] = organism
                    files[name].append(row)
            pairs += read_jsonl(Path(tmp) / organism / contract.PAIRS)
            ident = result["manifest"]
            identities[organism] = {k: ident[k] for k in ("weights_sha256", "weights_hash", "data_sha256",
                                                          "dtype", "device_type", "run_fingerprint")}
            identities[organism]["tensor_sha256"] = key["weights_sha256"]
    final, out = out, staging_dir(out)   # written in full beside the old bundle, then swapped in
    for name, filename in FILES.items():
        write_atomic(out / filename, jsonl_text(files[name]))
    pairs_text = jsonl_text(pairs)
    write_atomic(out / contract.PAIRS, pairs_text)
    key = combined_key(keys)
    write_atomic(out / contract.KEY, json_text(key))
    write_atomic(out / "key_check.json", json_text(key_check))
    written = {name: read_jsonl(out / filename) for name, filename in FILES.items()}
    attribution = written["attribution"] + written["attribution_heads"]
    patching = written["patching"] + written["patching_heads"]
    recovery = keyrecovery.summary(attribution, patching, key, bootstrap)
    write_atomic(out / keyrecovery.SPEC_FILE,
                 jsonl_text(keyrecovery.spec_rows(keyrecovery.pair_table(attribution, patching), key)))
    identity = {"model": f"{len(organisms)} planted organisms ({', '.join(FAMILIES)})",
                "data_sha256": hashlib.sha256(pairs_text.encode()).hexdigest(),
                "seed": 0, "dtype": "float32", "device_type": "cpu", "objective": 0,
                "weights_hash": WEIGHTS_HASH, "organisms": identities}
    summary_check = {k: v for k, v in key_check.items() if k != "per_organism"}
    extra = {"attribution_sum_gap": attribution_gap(written["attribution"]), "key_check": summary_check,
             "key_recovery": recovery, "validity": validity(key_check, recovery)}
    # The committed planted-v2 bundle was computed with the mean of per-pair ratios, the form its
    # registrations froze (keyrecovery's `site` aggregation). Every pair of a rule has the same
    # clean margin by construction, so it equals the one patch score (docs/statistics.md) within
    # 6e-6 on every component; kept so that a rerun makes the committed numbers, now naming it.
    summary = golden(STUDY, identity["model"], identity, written, None, contract.TOLERANCE, extra,
                     patch_score="mean_ratio")
    write_atomic(out / contract.GOLDEN, json_text(summary))
    write_atomic(out / contract.README, bundle_readme(STUDY, summary, False, mode=mode) + KEY_README)
    manifest = {"study": STUDY, **identity, "packages": versions(), "threads": threads, "numerics": mode,
                "git": {"commit": head, "dirty": dirty}, "wall_time_s": round(time.time() - started, 3),
                "command": "python -m measure.studies.planted run " + " ".join(sys.argv[2:])}
    write_atomic(out / contract.MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    replace_dir(out, final)
    return {"golden": summary, "manifest": manifest}


KEY_README = """
## `key.json` — the planted answer key (written by the construction, not measured)

- `construction`, `universe`, `strengths`, `keys`: what the key is, its three currencies of
  strength and its three definitions.
- `mechanisms.<name>`: which method the trap is aimed at, why, and its members (key or distractor).
- `families`, `organisms.<id>`: the layouts and rule mixes; each organism's seed, weights' sha256
  and the residual direction of each named channel.
- `dimensions.<family>-s<seed>-<rule>`: `organism`, `family`, `rule`, `mechanism`, `aimed_at`,
  `trap`, `weight`, `words`, `components` (the circuit key), `keys` (`circuit`, `direct`,
  `single`), `roles.<component>` (`role`, `shapley`, `direct_share`, `removal_effect`) and
  `distractors` (components planted to mislead, not in the key).

## `key_check.json` and golden.json's `key_check`

Per-side resample ablation against the design (measure/studies/planted/verify.py): for each
organism, rule and check (`necessity`, `sufficiency`, `resample <members>`), the components
resampled and the mean and largest |patched margin - designed margin| / |weight| over the
held-out twins. golden.json keeps the summary and, per dimension, necessity, sufficiency and the
worst trap check.

## `spec_curve.jsonl` and golden.json's `key_recovery`, `validity`

`spec_curve.jsonl`: one row per (headline, specification): `headline` (attribution, patching,
gap), the choices (`floor`, `key`, `aggregation`, `metric`, `mode`), `primary`, `value`,
`reference` (chance, or 0 for the gap) and `holds`. `key_recovery` (keyrecovery.py): the
primary specification and the grid, `headline` (each headline's value, interval and share),
`by_method`, `gap`, `by_family`, `by_mechanism`, `spec_curve` (share, min, median, max per
headline), `background` (score quantiles of the components outside the key beside the minor
carriers'), `overlap`, `traps` and `by_role` (top-k inclusion). `reproduce.py` recomputes every
point estimate of the block and every row of `spec_curve.jsonl` from the JSONL files and
`key.json`. `validity/failed` is 1 when a key check failed or the background does not overlap
the weakest key members (the kill criterion of every registration).
"""
