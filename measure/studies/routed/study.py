"""`python -m measure.studies.routed.study commit`, then `... train [--seeds 0-19]`, then
`... measure`, then `... unblind`: draw the routed study's salt and commit to it, train its
organisms, score their components blind, and reveal the keys (docs/routed.md). After unblinding,
`python -m measure.studies.routed.bundle` prints key recovery and writes the bundle.

The salt lives in `sealed/routed/salt` (made there once, never committed before unblinding); its
sha256 goes to `models/routed/commitment.json`, which is committed before any analysis runs.
Each seed's weights and tokenizer go to `models/routed/seed-NN/` with a public `training.json`
(the keyed rule, losses, held-out accuracy, whether the key passed its validation); what names
the key (the keys, the validation's per-component figures) goes to `sealed/routed/seed-NN.json`.
A seed already trained is skipped, so an interrupted run resumes; nothing half-written is left.

`measure` runs the repository's runner (attribution, and patching of every head and MLP in each
mode) on each trained organism's study twins: STUDY_TWINS twins of its keyed rule and as many
null twins, never seen in training or validation. It reads no key: the organism folders hold
none, and the sealed reports are not opened. Its bundles go to `models/routed/blind-scores/`
(3 MB a seed, not committed: the committed weights and the portable numerics remake them), and
the sha256 of their per-pair rows to `models/routed/blind-scores.json`, which is committed before
unblinding: the scores are fixed before anyone can compare them with a key.

`unblind` is the one step that reads the salt for analysis. It refuses unless every seed is
trained and scored, the scores match `blind-scores.json`, and that file and the commitment are
committed unchanged; then it writes `models/routed/unblinded.json`: the salt, the commit it
unblinded at and the one that fixed the scores, and per organism its key, its ten decoys and its
sealed validation. Committing that file is the unblinding's log entry.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
from pathlib import Path

from safe_io import write_atomic

from measure.errors import MeasureError
from measure.runner.jsonio import json_text, read_json
from measure.studies.routed.keys import NULL_RULE

ROOT = Path(__file__).resolve().parents[3]
SEALED = ROOT / "sealed" / "routed"
MODELS = ROOT / "models" / "routed"
SCORES = MODELS / "blind-scores"
SEEDS = range(20)
STUDY_TWINS = 48
DESIGN = "docs/routed.md, the sixth design; registrations/routed-gap.yaml and routed-null.yaml"


def organism_name(seed: int) -> str:
    """The folder (and record key) of organism `seed`: `seed-NN`."""
    return f"seed-{seed:02d}"


def dimension(seed: int, rule: str) -> str:
    """The dimension of organism `seed`'s twins of `rule` (or of the null rule): `sNN-<rule>`."""
    return f"s{seed:02d}-{rule}"


def parse_seeds(text: str) -> list[int]:
    """'0-19', '3', '0,2,4-6' -> sorted seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise MeasureError(f"--seeds {text!r}: seeds are numbers and ranges such as 0-19 or 0,2,4-6")
        seeds.update(range(int(lo), int(hi or lo) + 1))
    return sorted(seeds)


def commit_to(salt: bytes, models: Path = MODELS) -> dict:
    """Write the commitment (the salt's sha256) if absent; refuse a salt that does not match one
    already written."""
    from measure.studies.routed.keys import commitment

    path = models / "commitment.json"
    record = {"salt_sha256": commitment(salt), "design": DESIGN, "seeds": [SEEDS.start, SEEDS.stop - 1]}
    if path.is_file():
        existing = read_json(path, "routed commitment")
        if existing.get("salt_sha256") != record["salt_sha256"]:
            raise MeasureError(f"{path}: its salt_sha256 is not the sha256 of {SEALED / 'salt'}; "
                               "a new salt needs a new, logged commitment, not an overwrite")
        return existing
    write_atomic(path, json_text(record))
    return record


def train_seed(seed: int, salt: bytes, models: Path = MODELS, sealed: Path = SEALED, progress: bool = True) -> dict:
    """Train and validate organism `seed` into `models/seed-NN/` (through a temporary folder,
    renamed when complete) and seal its key; the public report."""
    from measure.studies.routed import train

    name = organism_name(seed)
    final = models / name
    if final.exists():
        raise MeasureError(f"{final}: exists; a trained seed is never overwritten (remove it by hand to retrain)")
    partial = models / f".{name}.partial"
    shutil.rmtree(partial, ignore_errors=True)   # ours: only this module makes a .partial folder
    report = train.build(partial, seed, salt, progress=progress)
    rule = report["keyed"]
    weights = (partial / "model.safetensors").read_bytes()
    public = {"seed": seed, "keyed": rule, "settings": report["settings"], "epoch_loss": report["epoch_loss"],
              "heldout_accuracy": report["heldout_accuracy"], "numerics": report["numerics"],
              "valid": report["validation"]["valid"],
              "clean_margin": report["validation"][rule]["clean_margin"],
              "weights_sha256": hashlib.sha256(weights).hexdigest()}
    write_atomic(sealed / f"{name}.json", json_text(report))
    write_atomic(partial / "training.json", json_text(public))
    partial.rename(final)
    return public


def study_pairs(seed: int, rule: str) -> list[dict]:
    """The twins organism `seed` is scored on: its keyed rule's and the null rule's, one lineage
    per twin (the organism is the unit of resampling), dimensions `sNN-<rule>` and `sNN-null`."""
    from measure.studies.routed import data

    rows = []
    for pair in data.twins("study", seed, STUDY_TWINS, rules=(rule,)):
        pair_id = dimension(seed, pair["pair_id"])
        rows.append({"dimension": dimension(seed, pair["dimension"]), "pair_id": pair_id, "seed_id": pair_id,
                     "prompt": pair["prompt"], "chosen": pair["chosen"], "rejected": pair["rejected"]})
    return rows


def measure_seed(seed: int, models: Path = MODELS, scores: Path = SCORES, progress: bool = False) -> Path:
    """Score organism `seed`'s components on its study twins with the runner; its bundle folder."""
    from measure.runner.config import StudyConfig
    from measure.runner.jsonio import jsonl_text, read_jsonl
    from measure.runner.run import run_study

    folder = models / organism_name(seed)
    public = read_json(folder / "training.json", "routed training report")
    out = scores / folder.name
    pairs = out.parent / f".{folder.name}.pairs.jsonl"
    write_atomic(pairs, jsonl_text(study_pairs(seed, public["keyed"])))
    try:
        run_study(StudyConfig(model=str(folder), study=f"routed-s{seed:02d}", out=out, pairs_file=pairs,
                              threads=1, progress=progress))
    finally:
        pairs.unlink(missing_ok=True)
    for rows_file in sorted(out.glob("*.jsonl")):   # rows name the organism, not this checkout's path
        rows = read_jsonl(rows_file)
        for row in rows:
            if "model" in row:
                row["model"] = f"models/routed/{folder.name}"
        write_atomic(rows_file, jsonl_text(rows))
    return out


def score_digests(scores: Path = SCORES) -> dict:
    """{seed folder: {file: sha256}} of the per-pair rows of every blind-score bundle (the
    summary, README and manifest name this checkout's path and the wall time)."""
    return {folder.name: {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.glob("*.jsonl"))}
            for folder in sorted(scores.iterdir()) if folder.is_dir() and folder.name.startswith("seed-")}


def _git(*args: str, root: Path = ROOT) -> str:
    import subprocess
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if done.returncode:
        raise MeasureError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


def _committed_unchanged(path: Path, root: Path = ROOT) -> str:
    """The last commit that changed `path`; an error if it is untracked or differs from HEAD."""
    rel = str(path.relative_to(root))
    try:
        last = _git("log", "-1", "--format=%H", "--", rel, root=root)
    except MeasureError:   # a history without commits
        last = ""
    if not last or _git("status", "--porcelain", "--", rel, root=root):
        raise MeasureError(f"{path}: not committed as it is; commit it before unblinding")
    return last


def unblind(salt: bytes, models: Path = MODELS, sealed: Path = SEALED, root: Path = ROOT, seeds=SEEDS) -> dict:
    """The unblinding record (see the module's docstring), after every check."""
    from measure.studies.routed import keys as keymod
    from measure.studies.routed import train

    commitment = read_json(models / "commitment.json", "routed commitment")
    if commitment["salt_sha256"] != keymod.commitment(salt):
        raise MeasureError(f"{sealed / 'salt'}: its sha256 is not the committed {commitment['salt_sha256']}")
    digests = read_json(models / "blind-scores.json", "routed blind scores")
    if digests != score_digests(models / "blind-scores"):
        raise MeasureError(f"{models / 'blind-scores'}: the scores differ from blind-scores.json; rerun measure")
    scored_at = _committed_unchanged(models / "blind-scores.json", root)
    _committed_unchanged(models / "commitment.json", root)
    organisms = {}
    for seed in seeds:
        name = organism_name(seed)
        if name not in digests:
            raise MeasureError(f"{models / 'blind-scores.json'}: {name} was not scored; run train and measure for every seed")
        public = read_json(models / name / "training.json", "routed training report")
        report = read_json(sealed / f"{name}.json", "sealed routed report")
        s = dict(train.SETTINGS, **public["settings"])
        drawn = keymod.draw(seed, salt, s["num_hidden_layers"], s["num_attention_heads"], s["key_size"])
        if report["keys"] != drawn:
            raise MeasureError(f"{sealed / (name + '.json')}: its keys are not the ones the salt draws")
        key = drawn[public["keyed"]]
        organisms[name] = {"keyed": public["keyed"], "key": key, "valid": report["validation"]["valid"],
                           "decoys": keymod.decoys(seed, salt, s["num_hidden_layers"], s["num_attention_heads"], key),
                           "validation": report["validation"]}
    return {"salt": salt.hex(), "unblinded_at": _git("rev-parse", "HEAD", root=root), "scores_fixed_at": scored_at,
            "organisms": organisms}


def write_unblinded(path: Path, make) -> None:
    """Write the unblinding record `make()` returns to `path`, once (a study is unblinded once)."""
    if path.exists():
        raise MeasureError(f"{path}: the study is already unblinded")
    write_atomic(path, json_text(make()))
    print(f"unblinded: commit {path} now, as the unblinding's log entry")


def train_missing(seeds: list[int], report: Path, train) -> None:
    """Train every seed whose public report (`report` with NN for the seed's folder name) is not
    there yet, printing one line a seed; `train(seed)` returns the public report."""
    for seed in seeds:
        if Path(str(report).replace("NN", organism_name(seed))).is_file():
            print(f"seed {seed}: already trained, skipped", flush=True)
            continue
        public = train(seed)
        print(f"seed {seed} ({public['keyed']}): {'valid' if public['valid'] else 'void'}, "
              f"clean margin {public['clean_margin']:.3f}", flush=True)


def _seeds(text: str) -> list[int]:
    seeds = parse_seeds(text)
    if any(s not in SEEDS for s in seeds):
        raise MeasureError(f"--seeds {text}: the study's seeds are {SEEDS.start} to {SEEDS.stop - 1}")
    return seeds


def main(argv=None) -> int:
    """Run the subcommand the arguments name; exit status (2 on an error, with its one line)."""
    from measure.studies.routed.keys import load_or_make_salt

    ap = argparse.ArgumentParser(prog="python -m measure.studies.routed.study",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("commit", help="make the salt (once) and write its sha256 to models/routed/commitment.json")
    tr = sub.add_parser("train", help="train the study organisms (skips seeds already trained)")
    tr.add_argument("--seeds", default=f"{SEEDS.start}-{SEEDS.stop - 1}", help="e.g. 0-19 or 0,2,4-6")
    me = sub.add_parser("measure", help="score every trained organism's components blind (no key read)")
    me.add_argument("--seeds", default=f"{SEEDS.start}-{SEEDS.stop - 1}", help="e.g. 0-19 or 0,2,4-6")
    sub.add_parser("unblind", help="reveal the keys: write models/routed/unblinded.json (commit it as the log entry)")
    args = ap.parse_args(argv)
    try:
        if args.command == "measure":   # blind: neither the salt nor a sealed report is opened
            for seed in _seeds(args.seeds):
                print(f"seed {seed}: scored into {measure_seed(seed)}", flush=True)
            write_atomic(MODELS / "blind-scores.json", json_text(score_digests()))
            return 0
        if args.command != "commit" and not (SEALED / "salt").is_file():   # only commit makes a salt
            raise MeasureError(f"{SEALED / 'salt'}: missing; train and unblind use the salt `commit` made "
                               "(after unblinding it is in models/routed/unblinded.json)")
        salt = load_or_make_salt(SEALED / "salt")
        record = commit_to(salt)
        if args.command == "commit":
            print(f"salt sha256 {record['salt_sha256']}: commit {MODELS / 'commitment.json'} before any analysis")
            return 0
        if args.command == "unblind":
            write_unblinded(MODELS / "unblinded.json", lambda: unblind(salt))
            return 0
        train_missing(_seeds(args.seeds), MODELS / "NN" / "training.json", lambda seed: train_seed(seed, salt))
    except MeasureError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
