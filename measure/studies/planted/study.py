"""The planted study: every organism measured with the repository's runner, one bundle.

`python -m measure.studies.planted.study` (re)builds the five organisms if their weights are missing
(checking each sha256), verifies their keys by resample ablation, runs `measure.runner.study.run_study`
on each (attribution, patching in all three modes on blocks and heads, the lens), and merges the
five runs into `bundles/planted/`: one dimension per (organism, rule), `s0-hazard` and so on, the
`model` field naming the organism. `golden.json` holds the runner's summary, the key check
(`key_check`) and the key-recovery scorecard (`key_recovery`, from `bundle_kit.keyrecovery`).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

from bundle_kit import contract, keyrecovery
from safe_io import git_state, replace_dir, staging_dir, write_atomic

from measure.studies.planted import organisms as planted
from measure.runner.config import REPO, StudyConfig
from measure.errors import MeasureError
from measure.runner.jsonio import json_text, jsonl_text, read_jsonl
from measure.runner.readme import bundle_readme
from measure.runner.rows import attribution_gap
from measure.runner.study import FILES, run_study, versions
from measure.runner.summary import golden

STUDY = "planted"


def combined_key(keys: list[dict]) -> dict:
    return {"construction": "hand-set weights (measure/studies/planted/organisms.py); every role and strength is written by the "
                            "code that sets the weights, nothing is measured to make the key",
            "universe": planted.UNIVERSE,
            "strength": "Shapley value of the component in its rule's key circuit (designed circuit function, "
                        "absent components contributing zero), as a fraction of the rule's weight; 0 outside the key",
            "roles": planted.ROLES,
            "organisms": {k["organism"]: {"seed": k["seed"], "weights_sha256": k["weights_sha256"],
                                          "shares": k["shares"], "channels": k["channels"]} for k in keys},
            "dimensions": {d: spec for k in keys for d, spec in k["dimensions"].items()}}


def run(out: Path, runs_dir: Path | None = None, seeds=planted.SEEDS, threads: int = 1,
        bootstrap: dict | None = None, progress: bool = False) -> dict:
    import torch

    started = time.time()
    head, dirty = git_state(REPO)
    git = {"commit": head, "dirty": dirty}
    torch.manual_seed(0)  # the key check runs before the runner sets these up
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    folders = [planted.ensure_built(seed) for seed in seeds]
    key_check = planted.verify_all(seeds=seeds)
    keys = [json.loads((f / "key.json").read_text(encoding="utf-8")) for f in folders]
    files = {name: [] for name in FILES}
    pairs, identities = [], {}
    with tempfile.TemporaryDirectory(prefix="planted-study-") as tmp:
        null_key = Path(tmp) / "no_key.json"  # the runner's own key summary is not this study's
        null_key.write_text("null\n", encoding="utf-8")
        for seed, folder in zip(seeds, folders):
            organism = f"planted-s{seed}"
            result = run_study(StudyConfig(
                model=str(folder), study=f"{STUDY}-s{seed}", out=Path(tmp) / organism,
                pairs_file=folder / contract.PAIRS, key_file=null_key, runs_dir=runs_dir,
                threads=threads, progress=progress))
            for name, filename in FILES.items():
                for row in read_jsonl(Path(tmp) / organism / filename):
                    row["model"] = organism
                    files[name].append(row)
            pairs += read_jsonl(Path(tmp) / organism / "pairs.jsonl")
            ident = dict(result["manifest"])
            identities[organism] = {k: ident[k] for k in ("weights_sha256", "weights_hash", "data_sha256",
                                                          "dtype", "device_type", "run_fingerprint")}
            identities[organism]["tensor_sha256"] = keys[seeds.index(seed)]["weights_sha256"]
    final, out = out, staging_dir(out)  # written in full beside the old bundle, then swapped in
    for name, filename in FILES.items():
        write_atomic(out / filename, jsonl_text(files[name]))
    pairs_text = jsonl_text(pairs)
    write_atomic(out / contract.PAIRS, pairs_text)
    key = combined_key(keys)
    write_atomic(out / contract.KEY, json_text(key))
    written = {name: read_jsonl(out / filename) for name, filename in FILES.items()}
    identity = {"model": f"planted-s{seeds[0]}..s{seeds[-1]}",
                "data_sha256": hashlib.sha256(pairs_text.encode()).hexdigest(),
                "seed": 0, "dtype": "float32", "device_type": "cpu", "objective": 0,
                "organisms": identities}
    extra = {"attribution_sum_gap": attribution_gap(written["attribution"]), "key_check": key_check,
             "key_recovery": keyrecovery.summary(written["attribution"] + written["attribution_heads"],
                                                 written["patching"] + written["patching_heads"], key, bootstrap)}
    summary = golden(STUDY, identity["model"], identity, written, None, contract.TOLERANCE, extra)
    write_atomic(out / contract.GOLDEN, json_text(summary))
    write_atomic(out / contract.README, bundle_readme(STUDY, summary, False) + KEY_README)
    manifest = {"study": STUDY, **identity, "packages": versions(), "threads": threads, "git": git,
                "wall_time_s": round(time.time() - started, 3),
                "command": "python -m measure.studies.planted.study " + " ".join(sys.argv[1:])
                if sys.argv and sys.argv[0].endswith("planted_study.py") else None}
    write_atomic(out / contract.MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    replace_dir(out, final)
    return {"golden": summary, "manifest": manifest}


KEY_README = """
## `key.json` — the planted answer key (written by the construction, not measured)

- `construction`, `universe`, `strength`, `roles`: what the key is and what each role means.
- `organisms.<id>`: the seed, the weights' sha256 (over each tensor's name, shape and float32
  bytes), the two carrier shares, and which residual direction holds each named channel.
- `dimensions.<s{seed}-{rule}>`: `organism`, `rule`, `weight` (the planted reward), `words`,
  `components` (the key), `roles.<component>` (`role`, `strength`) and `distractors` (decoy,
  canceller, tracker: components that look involved and are not in the key).

## `golden.json`: `key_check` and `key_recovery`

- `key_check`: the resample-ablation verification of every key (`measure/studies/planted/organisms.py` `verify`):
  per organism and rule, `necessity_residual` (key components resampled: mean |margin| / |clean
  margin|, should be near 0), `sufficiency_retained` (everything else resampled: mean margin /
  clean margin, should be near 1), `passes` at `tolerance`; `worst_deviation` over all.
- `key_recovery` (`keyrecovery.py`): per method (`attribution`, `patching_mean`, `patching_zero`,
  `patching_swap`), `auc` (AUC of |score| against key membership: `mean`, `ci`, `per_organism`,
  `spread`, `per_rule`), `rho_strength` (Spearman of |score| with role strength: `mean`, `ci`,
  `per_organism`), `role_recall` and `distractor_rate` (probability of being in the top k by
  |score|, k the key size, ties shared, by role), and `gap` (each patching mode minus
  attribution, with its interval and per organism). `reproduce.py` recomputes every point
  estimate of this block from the JSONL files and `key.json`.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m measure.studies.planted.study", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=planted.REPO / "bundles" / STUDY)
    parser.add_argument("--seeds", default=",".join(map(str, planted.SEEDS)))
    parser.add_argument("--resamples", type=int, default=keyrecovery.BOOTSTRAP["resamples"])
    parser.add_argument("--runs-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        result = run(args.out, args.runs_dir, tuple(int(s) for s in args.seeds.split(",")),
                     bootstrap={"resamples": args.resamples}, progress=True)
    except MeasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    kr = result["golden"]["key_recovery"]
    for m in keyrecovery.METHODS:
        print(f"{m:15s} AUC {kr['auc'][m]['mean']:.3f} {kr['auc'][m]['ci']}  rho {kr['rho_strength'][m]['mean']:.3f}")
    print(f"gap mean-attribution {kr['gap']['mean_minus_attribution']:+.3f} {kr['gap']['mean_minus_attribution_ci']}")
    print(f"key check worst deviation {result['golden']['key_check']['worst_deviation']:.4f}; "
          f"wall {result['manifest']['wall_time_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
