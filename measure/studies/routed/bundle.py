"""`python -m measure.studies.routed.bundle [--print-only]`: the routed study's key recovery,
printed, and its bundle, `bundles/routed/`, from the blind scores and the unblinding record
(docs/routed.md).

Every file is computed from the runner's rows (`models/routed/blind-scores/`, checked against the
committed digest first) and `models/routed/unblinded.json`:

- `attribution_per_pair.jsonl`, `patching_per_pair.jsonl` (contract rows, every bundle's check):
  the blocks (embed, attention, MLP, bias) of every organism, patching in `mean` mode only;
- `hiddenkeys_per_pair.jsonl` (bundle_kit/hiddenkeys.py ROWS_FILE): one row a pair, every head's
  and MLP's attribution and effect in each mode, what key recovery is computed from;
- `key.json`: each organism's keyed rule, key, decoys and validation, the salt and the commits;
- `spec_curve.jsonl`: the specification curve, one row a headline and specification;
- `pairs.jsonl`, `golden.json`, `README.md`, `manifest.json`.

The folder is written beside the old one and swapped in whole.
"""
from __future__ import annotations

import hashlib
import json

from safe_io import replace_dir, staging_dir, write_atomic

from bundle_kit import contract, hiddenkeys, rankstats
from measure.errors import MeasureError
from measure.runner.jsonio import json_text, jsonl_text, read_json
from measure.studies.routed.study import MODELS, NULL_RULE, ROOT, SCORES, dimension, organism_name, score_digests

STUDY = "routed"
OUT = ROOT / "bundles" / STUDY
FILES = {"attribution": contract.ATTRIBUTION, "patching": contract.PATCHING,
         "attribution_heads": contract.HEADS_ATTRIBUTION, "patching_heads": contract.HEADS_PATCHING}
SPEC_FILE = "spec_curve.jsonl"
CONSTRUCTION = ("made by training: per organism, two components drawn at random from a salt committed as its sha256 "
                "before training were the only parameters trained on the keyed rule (measure/studies/routed/train.py), "
                "then validated by per-side resampling, neither scored method (necessity and sufficiency at least 0.9 "
                "of the margin, leak under 0.1); an organism that failed is void and not counted")
IDENTITY = ("weights_sha256", "data_sha256", "run_fingerprint")


def key_doc(record: dict) -> dict:
    """key.json: the unblinding record with each organism's dimensions named and its validation
    cut to the keyed rule's figures."""
    organisms = {}
    for name, o in sorted(record["organisms"].items()):
        seed = int(name.removeprefix("seed-"))
        check = o["validation"][o["keyed"]]
        organisms[name] = {"keyed": o["keyed"], "keyed_dimension": dimension(seed, o["keyed"]),
                           "null_dimension": dimension(seed, NULL_RULE), "key": o["key"], "decoys": o["decoys"],
                           "valid": o["valid"],
                           "validation": {k: check[k] for k in ("clean_margin", "necessity", "sufficiency", "leak",
                                                                "leak_component", "member_share", "n")}}
    return {"construction": CONSTRUCTION, "salt": record["salt"], "unblinded_at": record["unblinded_at"],
            "scores_fixed_at": record["scores_fixed_at"], "organisms": organisms}


def read_scores(name: str, scores=SCORES) -> dict[str, list[dict]]:
    """Organism `name`'s blind-score rows by kind (FILES)."""
    return {kind: rankstats.read_jsonl(scores / name / file) for kind, file in FILES.items()}


def check_scores(scores=SCORES, models=MODELS) -> None:
    """Refuse scores that are missing or differ from the committed digest."""
    if not scores.is_dir() or score_digests(scores) != read_json(models / "blind-scores.json", "routed blind scores"):
        raise MeasureError(f"{scores}: missing or not the scores {models / 'blind-scores.json'} fixed; "
                           "run `python -m measure.studies.routed.study measure` to remake them")


def wide_rows(names, scores=SCORES) -> list[dict]:
    """hiddenkeys' rows of the organisms `names`: every head's and MLP's attribution and effects."""
    attribution, patching = [], []
    for name in names:
        rows = read_scores(name, scores)
        attribution += rows["attribution"] + rows["attribution_heads"]
        patching += rows["patching"] + rows["patching_heads"]
    return hiddenkeys.wide_rows(attribution, patching)


def build(out=OUT) -> dict:
    """Write the bundle; golden.json's content."""
    from measure.runner.readme import bundle_readme
    from measure.runner.study import versions
    from measure.runner.summary import golden

    check_scores()
    key = key_doc(read_json(MODELS / "unblinded.json", "routed unblinding record"))
    contract_rows = {"attribution": [], "patching": []}
    pairs, identities = [], {}
    for name in key["organisms"]:
        rows = read_scores(name)
        contract_rows["attribution"] += rows["attribution"]
        contract_rows["patching"] += [r for r in rows["patching"] if r["mode"] == contract.RANK_MODE]
        pairs += rankstats.read_jsonl(SCORES / name / contract.PAIRS)
        manifest = read_json(SCORES / name / contract.MANIFEST, "blind-score manifest")
        identities[name] = {k: manifest[k] for k in IDENTITY}
    wide = wide_rows(key["organisms"])
    result = hiddenkeys.recompute(wide, key)
    _print(result)
    pairs_text = jsonl_text(pairs)
    mode = read_json(SCORES / organism_name(0) / contract.MANIFEST, "blind-score manifest")["numerics"]
    identity = {"model": f"{len(identities)} routed organisms (models/routed/seed-NN)",
                "data_sha256": hashlib.sha256(pairs_text.encode()).hexdigest(), "seed": 0, "dtype": "float32",
                "device_type": "cpu", "objective": 0, "organisms": identities}
    extra = hiddenkeys.golden_blocks(result, key)
    files = {**contract_rows, "attribution_heads": [], "patching_heads": [], "lens": []}
    summary = golden(STUDY, identity["model"], identity, files, None, contract.TOLERANCE, extra,
                     patch_score="ratio_of_means")
    manifest = {"study": STUDY, **identity, "packages": versions(), "threads": 1, "numerics": mode,
                "command": "python -m measure.studies.routed.bundle"}
    write_folder(out, contract_rows["attribution"], contract_rows["patching"], wide, key, result["curve"], pairs_text,
                 summary, bundle_readme(STUDY, summary, False, mode=mode) + README, manifest)
    return summary


def write_folder(out, attribution, patching, wide, key, curve, pairs_text, summary, readme, manifest) -> None:
    """A hidden-key study's bundle folder (this module's docstring lists the files), written
    beside `out` and swapped in whole."""
    staged = staging_dir(out)
    write_atomic(staged / contract.ATTRIBUTION, jsonl_text(attribution))
    write_atomic(staged / contract.PATCHING, jsonl_text(patching))
    write_atomic(staged / hiddenkeys.ROWS_FILE, jsonl_text(wide))
    write_atomic(staged / contract.KEY, json_text(key))
    write_atomic(staged / SPEC_FILE, jsonl_text(hiddenkeys.spec_rows(curve)))
    write_atomic(staged / contract.PAIRS, pairs_text)
    write_atomic(staged / contract.GOLDEN, json_text(summary))
    write_atomic(staged / contract.README, readme)
    write_atomic(staged / contract.MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    replace_dir(staged, out)


README = f"""
## The routed study's own files (bundle_kit/hiddenkeys.py computes from them)

Twenty small reward models (`models/routed/seed-NN/` in the repository), each trained so that one
rule lives in two components drawn at random from a secret salt, committed as a hash before any
analysis and revealed only after every score below was fixed (`key.json` names the commits).
`reproduce.py` recomputes every value of `key_recovery`, `null`, `validity`, `key_check` and
`organisms`, and every row of `{SPEC_FILE}`, from
`{hiddenkeys.ROWS_FILE}` and `{contract.KEY}` alone.

- `{hiddenkeys.ROWS_FILE}`: one row a pair (`dimension` `sNN-<rule>` or `sNN-null`): its
  `clean_margin`, the `components` (every head and MLP, sorted), and in that order each one's
  `attribution` and its effect when patched in `mean`, `zero` and `swap` mode.
- `{contract.KEY}`: per organism (`seed-NN`) the keyed rule, its dimensions, the `key`, ten
  `decoys` (made like a key from the other components, scored on the null twins), whether the
  key passed its validation (`valid`) and that validation's figures (necessity, sufficiency,
  leak, each member's share); the `salt`, the commit that fixed the scores (`scores_fixed_at`)
  and the one that unblinded (`unblinded_at`).
- `{SPEC_FILE}`: per headline (`gap`, `attribution`, `patching`) and specification of the
  choices it depends on (the others are `none`): `floor`, `aggregation` (`signed`: |mean
  attribution|, `magnitude`: mean |attribution|), `mode`, `patch_score`, the `value` over the
  valid organisms, its `reference` (0 for the gap, chance 0.5 for a method) and whether it
  `holds` (above the reference).
- golden.json `key_recovery`: each method's mean AUC over the valid organisms and the gap, with
  90 % intervals resampling organisms; in it `spec_curve` (per headline the share of
  specifications on the primary's side), `order_claimed` (1 only if the gap's interval excludes
  zero and at least `robust_share` of the specifications agree) and `by_method` (each method per
  keyed rule, described after unblinding, not registered). `null`: the decoys' mean AUC (all
  organisms), `worst_distance` from 0.5, and `key_on_null` (the real key on the null twins, not
  registered); `validity`: the void share and `failed`; `key_check`: how many keys passed their
  validation, and the void organisms; `organisms`: each organism's figures, with every
  component's two scores on its keyed and null twins.
"""


def recovery(models=MODELS, scores=SCORES) -> dict:
    """Key recovery at every specification (bundle_kit/hiddenkeys.py `recompute`) from the blind
    scores and the unblinding record: the primary's blocks ("summary"), the specification curve
    ("curve"), each organism's primary result ("organisms"), "order_claimed" and "by_rule"."""
    key = key_doc(read_json(models / "unblinded.json", "routed unblinding record"))
    check_scores(scores, models)
    return hiddenkeys.recompute(wide_rows(key["organisms"], scores), key)


def _print(result: dict) -> None:
    kr, null, validity = (result["summary"][k] for k in ("key_recovery", "null", "validity"))
    print(f"organisms {kr['organisms']}, valid {kr['valid']} (void share {validity['void_share']:.2f}); "
          f"validity/failed {validity['failed']}")
    for k in ("attribution", "patching", "gap"):
        lo, hi = kr[k]["interval"]
        print(f"{k:<12} {kr[k]['value']:+.3f}  {kr['interval_level']:.0%} interval [{lo:+.3f}, {hi:+.3f}]  "
              f"share of {result['curve']['specifications']} specifications agreeing {result['curve']['share_agreeing'][k]:.2f}")
    print(f"null (decoys): attribution {null['attribution']:.3f}, patching {null['patching']:.3f}, "
          f"worst distance from 0.5 {null['worst_distance']['value']:.3f}")
    print(f"key on null twins (not registered): attribution {null['key_on_null']['attribution']:.3f}, "
          f"patching {null['key_on_null']['patching']:.3f}")
    print(f"order claimed: {result['order_claimed']}")
    for name, o in sorted(result["organisms"].items()):
        print(f"  {name}: attribution {o['attribution']:.3f}, patching {o['patching']:.3f}, gap {o['gap']:+.3f}")


def main(argv=None) -> int:
    """Print key recovery; write the bundle unless --print-only. Exit status 2 on an error."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m measure.studies.routed.bundle", description=__doc__.split("\n\n")[0])
    ap.add_argument("--print-only", action="store_true", help="print key recovery; write nothing")
    args = ap.parse_args(argv)
    try:
        if args.print_only:
            _print(recovery())
        else:
            build()
            print(f"wrote {OUT}")
    except MeasureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
