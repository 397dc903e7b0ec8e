"""`python -m measure.studies.transfer.study commit`, then `... train`, `... measure` and
`... unblind`: the routed calibration carried to the real-preferences reward model
(docs/transfer.md, registrations/transfer-*.yaml). After unblinding, `python -m
measure.studies.transfer.result` prints the figures and `python -m measure.studies.transfer.bundle`
writes the bundle.

- `commit` draws the study's salt into `sealed/transfer/salt` (once; ignored by git) and writes its
  sha256 to `models/transfer/commitment.json`, committed before any organism is trained.
- `train [--seeds 0-49]` plants each seed's rule in its key (measure/studies/transfer/plant.py)
  and checks the key (score.validate). The trained tensors go to
  `models/transfer/organisms/seed-NN.safetensors` (ignored by git: the salt and the portable
  numerics remake them), a public `models/transfer/seed-NN.json` (rule, losses, validity, the
  tensors' sha256) beside them; the key and the check's figures go to
  `sealed/transfer/seed-NN.json` only. A seed already trained is skipped.
- `measure` scores every organism's heads and MLPs of layers 4 and 5 on its study twins
  (score.blind_rows) without opening the salt or a sealed report: rows to
  `models/transfer/blind-scores/seed-NN.jsonl` (ignored by git), their sha256 to
  `models/transfer/blind-scores.json`, committed before unblinding.
- `unblind` checks the commitment and the digests are committed unchanged, then writes
  `models/transfer/unblinded.json` (the salt, every key, decoy and check); commit it as the log.
- `measure.studies.transfer.result` prints key recovery on the real trunk and the equivalence
  test against the routed organisms (bundle_kit/hiddenkeys.py); `measure.studies.transfer.bundle`
  writes `bundles/transfer/`.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from safe_io import write_atomic

from measure.errors import MeasureError
from measure.runner.jsonio import json_text, jsonl_text, read_json
from measure.studies.routed.study import (_committed_unchanged, _git, organism_name, parse_seeds, train_missing,
                                          write_unblinded)

ROOT = Path(__file__).resolve().parents[3]
SEALED = ROOT / "sealed" / "transfer"
MODELS = ROOT / "models" / "transfer"
TENSORS = MODELS / "organisms"
SCORES = MODELS / "blind-scores"
SEEDS = range(50)
STUDY_TWINS = 32
TAG = "transfer"
DESIGN = "docs/transfer.md; registrations/transfer-equivalence.yaml, transfer-gap.yaml and transfer-null.yaml"


def keyed_rule(seed: int) -> str:
    """The rule organism `seed` plants: the five rules in turn (ten seeds each)."""
    from measure.studies.transfer.data import RULES
    return list(RULES)[seed % len(RULES)]


def host_path() -> str:
    """The real-preferences model, assembled and checked (models/realprefs)."""
    from measure.studies.realprefs.model import ensure_model
    return str(ensure_model())


def draw_key(seed: int, salt: bytes, s: dict) -> list[str]:
    """Organism `seed`'s key: one head (and `key_size` - 1 more heads or MLPs) of layers
    `first_layer` and up, from (seed, salt)."""
    from measure.studies.routed import keys
    rule = keyed_rule(seed)
    return keys.draw(seed, salt, 6, 12, s["key_size"], rules=(rule,), first=s["first_layer"], tag=TAG)[rule]


def draw_decoys(seed: int, salt: bytes, key: list[str], s: dict) -> list[list[str]]:
    """Ten decoy keys made like organism `seed`'s, outside it (the null control)."""
    from measure.studies.routed import keys
    return keys.decoys(seed, salt, 6, 12, key, size=s["key_size"], first=s["first_layer"], tag=TAG)


def valid(check: dict, s: dict) -> bool:
    """The registered validity: the rule learnt (mean check margin at least `min_margin`) and the
    key necessary (resampling it removes at least 0.9 of that margin)."""
    return check["clean_margin"] >= s["min_margin"] and check["necessity"] >= 0.9


def _adapter(path: str):
    """The host at `path` (host_path), read along the helpfulness head."""
    from measure.models.adapter import load
    return load(path, objective=0)


def train_seed(seed: int, salt: bytes, progress: bool = False) -> dict:
    """Plant and check organism `seed`; its public report (the key sealed)."""
    import torch
    from safetensors.torch import save_file

    from measure.studies.organism.train import deterministic
    from measure.studies.transfer import data, plant, score

    s = plant.SETTINGS
    mode = deterministic(seed)
    path = host_path()
    adapter = _adapter(path)
    rule, key = keyed_rule(seed), draw_key(seed, salt, s)
    check = data.twins("check", seed, rule, s["check_twins"], path)
    with torch.no_grad():
        r = plant.top_rewards(adapter, plant.lower_stream(adapter, plant.sequences(check), s["first_layer"]),
                              s["first_layer"])
    host_margin = float((r[0::2] - r[1::2]).double().mean())
    losses = plant.fit(adapter, data.twins("train", seed, rule, s["train_twins"], path), key, s, seed, progress)
    figures = score.validate(adapter, check, key, seed, s["first_layer"])
    tensors = plant.key_state(adapter.model, key, adapter.head_dim)
    name = organism_name(seed)
    TENSORS.mkdir(parents=True, exist_ok=True)
    partial = TENSORS / f".{name}.partial.safetensors"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(partial))
    digest = hashlib.sha256(partial.read_bytes()).hexdigest()
    public = {"seed": seed, "keyed": rule, "settings": s, "epoch_loss": losses, "numerics": mode,
              "host_margin": host_margin, "clean_margin": figures["clean_margin"], "valid": valid(figures, s),
              "tensors_sha256": digest}
    write_atomic(SEALED / f"{name}.json", json_text({"key": key, "check": figures, **public}))
    partial.rename(TENSORS / f"{name}.safetensors")
    write_atomic(MODELS / f"{name}.json", json_text(public))
    return public


def measure_seed(seed: int) -> Path:
    """Score organism `seed` blind: the host with its trained tensors, on its study twins."""
    import torch
    from safetensors.torch import load_file

    from measure.studies.organism.train import deterministic
    from measure.studies.transfer import data, plant, score

    s = plant.SETTINGS
    name = organism_name(seed)
    public = read_json(MODELS / f"{name}.json", "transfer training report")
    weights = TENSORS / f"{name}.safetensors"
    if hashlib.sha256(weights.read_bytes()).hexdigest() != public["tensors_sha256"]:
        raise MeasureError(f"{weights}: not the tensors {MODELS / (name + '.json')} records; retrain the seed")
    deterministic(seed)
    path = host_path()
    adapter = _adapter(path)
    params = dict(adapter.model.named_parameters())
    with torch.no_grad():
        for k, v in load_file(str(weights)).items():   # whatever the file holds: the analysis reads no names
            params[k].copy_(v)
    twins = (data.twins("study", seed, public["keyed"], STUDY_TWINS, path)
             + data.twins("study", seed, data.NULL_RULE, STUDY_TWINS, path))
    for t in twins:
        t["dimension"] = f"s{seed:02d}-{t['dimension']}"
    attribution, patching = score.blind_rows(adapter, twins, s["first_layer"])
    out = SCORES / f"{name}.jsonl"
    write_atomic(out, jsonl_text([{"kind": "attribution", **r} for r in attribution]
                                 + [{"kind": "patching", **r} for r in patching]))
    return out


def score_digests(scores: Path = SCORES) -> dict:
    """{seed file: sha256} of every blind-score file."""
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(scores.glob("seed-*.jsonl"))}


def unblind(salt: bytes) -> dict:
    """The unblinding record, after every check (module docstring)."""
    from measure.studies.routed import keys as keymod
    from measure.studies.transfer import plant

    commitment = read_json(MODELS / "commitment.json", "transfer commitment")
    if commitment["salt_sha256"] != keymod.commitment(salt):
        raise MeasureError(f"{SEALED / 'salt'}: its sha256 is not the committed {commitment['salt_sha256']}")
    digests = read_json(MODELS / "blind-scores.json", "transfer blind scores")
    if digests != score_digests():
        raise MeasureError(f"{SCORES}: the scores differ from blind-scores.json; rerun measure")
    scored_at = _committed_unchanged(MODELS / "blind-scores.json", ROOT)
    _committed_unchanged(MODELS / "commitment.json", ROOT)
    organisms = {}
    for seed in SEEDS:
        name = organism_name(seed)
        if f"{name}.jsonl" not in digests:
            raise MeasureError(f"{MODELS / 'blind-scores.json'}: {name} was not scored; run train and measure for every seed")
        sealed = read_json(SEALED / f"{name}.json", "sealed transfer report")
        key = draw_key(seed, salt, plant.SETTINGS)
        if sealed["key"] != key:
            raise MeasureError(f"{SEALED / (name + '.json')}: its key is not the one the salt draws")
        organisms[name] = {"keyed": sealed["keyed"], "key": key, "valid": sealed["valid"],
                           "decoys": draw_decoys(seed, salt, key, plant.SETTINGS), "check": sealed["check"],
                           "host_margin": sealed["host_margin"]}
    return {"salt": salt.hex(), "unblinded_at": _git("rev-parse", "HEAD", root=ROOT), "scores_fixed_at": scored_at,
            "organisms": organisms}


def main(argv=None) -> int:
    """Run the subcommand the arguments name; exit status (2 on an error, with its one line)."""
    from measure.studies.routed.keys import commitment, load_or_make_salt

    ap = argparse.ArgumentParser(prog="python -m measure.studies.transfer.study", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("commit", help="make the salt (once) and write its sha256 to models/transfer/commitment.json")
    for name, text in (("train", "plant and check every seed's key (skips seeds already trained)"),
                       ("measure", "score every trained organism blind (no key read)")):
        sub.add_parser(name, help=text).add_argument("--seeds", default=f"{SEEDS.start}-{SEEDS.stop - 1}")
    sub.add_parser("unblind", help="reveal the keys: write models/transfer/unblinded.json (commit it as the log entry)")
    args = ap.parse_args(argv)
    try:
        seeds = parse_seeds(getattr(args, "seeds", "0"))
        if any(s not in SEEDS for s in seeds):
            raise MeasureError(f"--seeds: the study's seeds are {SEEDS.start} to {SEEDS.stop - 1}")
        if args.command == "measure":   # blind: neither the salt nor a sealed report is opened
            for seed in seeds:
                print(f"seed {seed}: scored into {measure_seed(seed)}", flush=True)
            write_atomic(MODELS / "blind-scores.json", json_text(score_digests()))
            return 0
        if args.command != "commit" and not (SEALED / "salt").is_file():
            raise MeasureError(f"{SEALED / 'salt'}: missing; only `commit` makes the salt")
        salt = load_or_make_salt(SEALED / "salt")
        path = MODELS / "commitment.json"
        record = {"salt_sha256": commitment(salt), "design": DESIGN, "seeds": [SEEDS.start, SEEDS.stop - 1]}
        if path.is_file() and read_json(path, "transfer commitment")["salt_sha256"] != record["salt_sha256"]:
            raise MeasureError(f"{path}: its salt_sha256 is not the sha256 of {SEALED / 'salt'}")
        if not path.is_file():
            write_atomic(path, json_text(record))
        if args.command == "commit":
            print(f"salt sha256 {record['salt_sha256']}: commit {path} before any organism is trained")
            return 0
        if args.command == "unblind":
            write_unblinded(MODELS / "unblinded.json", lambda: unblind(salt))
            return 0
        train_missing(seeds, MODELS / "NN.json", lambda seed: train_seed(seed, salt))
    except MeasureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
