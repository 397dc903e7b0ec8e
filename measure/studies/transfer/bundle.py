"""`python -m measure.studies.transfer.bundle`: the transfer study's bundle,
`bundles/transfer/`, from the blind scores and the unblinding record (docs/transfer.md).

- `hiddenkeys_per_pair.jsonl` (bundle_kit/hiddenkeys.py ROWS_FILE): one row a pair, every head's
  and MLP's attribution and mean-mode effect: what every published value is computed from;
- `attribution_per_pair.jsonl`, `patching_per_pair.jsonl` (contract rows, every bundle's generic
  check): the two MLPs' rows of the same pairs (all 26 components would be 27 MB);
- `key.json`: each organism's rule, key, decoys, check and host margin, the salt, the commits,
  and the routed gaps the equivalence test compares with; `spec_curve.jsonl`; `pairs.jsonl` (the
  twins' text); `golden.json`, `README.md`, `manifest.json`.

Written beside the old folder and swapped in whole.
"""
from __future__ import annotations

import hashlib
import json

from bundle_kit import contract, hiddenkeys
from measure.runner.jsonio import jsonl_text
from measure.studies.routed.bundle import SPEC_FILE, write_folder
from measure.studies.transfer.study import ROOT, STUDY_TWINS, host_path

STUDY = "transfer"
OUT = ROOT / "bundles" / STUDY
CONTRACT_COMPONENTS = ("mlp_L4", "mlp_L5")


def contract_rows(wide: list[dict]) -> tuple[list[dict], list[dict]]:
    """Contract rows of CONTRACT_COMPONENTS from hiddenkeys' rows."""
    attribution, patching = hiddenkeys.long_rows(wide)
    keep = set(CONTRACT_COMPONENTS)

    def extra(r):
        return {"model": "realprefs+key", "kind": "mlp", "layer": int(r["component"].rsplit("L", 1)[1])}
    return ([{**extra(r), **r} for r in attribution if r["component"] in keep],
            [{**extra(r), **r, "offdist_z": None, "offdist_flag": None} for r in patching if r["component"] in keep])


def pairs(key: dict) -> list[dict]:
    """Every study twin's text (decoded), in the rows' order of organisms."""
    from transformers import AutoTokenizer

    from measure.studies.transfer import data

    path = host_path()
    tok = AutoTokenizer.from_pretrained(path)
    out = []
    for name, o in key["organisms"].items():
        seed = int(name.removeprefix("seed-"))
        for rule in (o["keyed"], data.NULL_RULE):
            for t in data.twins("study", seed, rule, STUDY_TWINS, path):
                out.append({"dimension": f"s{seed:02d}-{rule}", "pair_id": t["pair_id"], "seed_id": t["seed_id"],
                            "prompt": "", "chosen": tok.decode(t["chosen_ids"]), "rejected": tok.decode(t["rejected_ids"]),
                            "base": t["base"], "position": t["position"]})
    return out


def build(out=OUT) -> dict:
    """Write the bundle; golden.json's content."""
    from measure.runner.readme import bundle_readme
    from measure.runner.study import versions
    from measure.runner.summary import golden
    from measure.studies.transfer import result as analysis

    result = analysis.compute()
    key, wide = result["key"], result["rows"]
    attribution, patching = contract_rows(wide)
    pairs_text = jsonl_text(pairs(key))
    mode = json.loads((ROOT / "models" / "transfer" / "seed-00.json").read_text(encoding="utf-8"))["numerics"]
    identity = {"model": f"{len(key['organisms'])} organisms planted in models/realprefs",
                "data_sha256": hashlib.sha256(pairs_text.encode()).hexdigest(), "seed": 0, "dtype": "float32",
                "device_type": "cpu", "objective": 0}
    files = {"attribution": attribution, "patching": patching, "attribution_heads": [], "patching_heads": [], "lens": []}
    summary = golden(STUDY, identity["model"], identity, files, None, contract.TOLERANCE,
                     hiddenkeys.golden_blocks(result, key), patch_score="ratio_of_means")
    manifest = {"study": STUDY, **identity, "packages": versions(), "threads": 1, "numerics": mode,
                "command": "python -m measure.studies.transfer.bundle"}
    write_folder(out, attribution, patching, wide, key, result["curve"], pairs_text, summary,
                 bundle_readme(STUDY, summary, False, mode=mode) + README, manifest)
    return summary


README = f"""
## The transfer study's own files (bundle_kit/hiddenkeys.py computes from them)

Fifty organisms, each the real-preferences reward model (`models/realprefs` in the repository)
with one attention head of layers 4 and 5 trained on a planted rule, the head drawn from a salt
committed as its sha256 before training and revealed after the scores were fixed (`key.json`
names the commits). `reproduce.py` recomputes every value of `key_recovery`, `null`,
`validity`, `key_check`, `organisms` and `transfer`, and every row of `{SPEC_FILE}`, from
`{hiddenkeys.ROWS_FILE}` and `{contract.KEY}` alone.

- `{hiddenkeys.ROWS_FILE}`: one row a pair (`dimension` `sNN-<rule>` or `sNN-null`): its
  `clean_margin`, the `components` (the 24 heads and 2 MLPs of layers 4 and 5, sorted), and in
  that order each one's `attribution` and its effect when mean-patched (`mean`).
- `{contract.ATTRIBUTION}`, `{contract.PATCHING}`: the same pairs' rows for the two MLPs only, in
  the contract's layout, for every bundle's generic check (its rank correlation over two
  components is not a study quantity).
- `{contract.KEY}`: per organism (`seed-NN`) the rule, its dimensions, the `key` (one head), ten
  `decoys`, `valid`, the `check` (necessity, sufficiency, leak, the member's share, on 64 check
  twins) and the host's margin on those twins; `reference`: the routed organisms' gaps and the
  registered bound.
- `{SPEC_FILE}`: as in the routed bundle, over the mean-mode specifications.
- `{contract.PAIRS}`: each study twin's text (decoded from its tokens), its base pair in
  `data/realprefs` and the position of the inserted word.
- golden.json `transfer`: the real trunk's mean gap over valid organisms (`gap`, its interval),
  the routed one (`reference_gap`), their `difference` with its 90 % interval, the `bound`, the
  `verdict` (transfers, fails or inconclusive) and `inside` (1 when it transfers). The other
  blocks are the routed bundle's.
"""


if __name__ == "__main__":
    build()
    print(f"wrote {OUT}")
