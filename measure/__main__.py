"""Command line: `python -m measure train` (the organism) and `python -m measure run` (a study)."""
from __future__ import annotations

import os
import sys

from measure import numerics, options
from measure.studies import TRAINERS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
numerics.set_environment()  # before anything imports torch, whatever the caller's environment says


DEFAULT_STUDY = "organism"
DTYPES = ("float32", "fp32", "bfloat16", "bf16", "float16", "fp16")


def parser() -> options.Parser:
    """The command line; every option is checked as it is parsed (`measure.options`)."""
    top = options.Parser(prog="python -m measure", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train the planted-key organism into models/organism/, "
                                      "(--model minilm) the MiniLM heads into models/minilm/, or "
                                      "(--model realprefs) the realprefs reward model into models/realprefs/")
    tr.add_argument("--model", choices=sorted(TRAINERS), default="organism")
    tr.add_argument("--out", type=options.folder, default=None,
                    help="output folder: new, or one this command trained (default models/<model>)")
    tr.add_argument("--seed", type=options.seed, default=0)
    tr.add_argument("--epochs", type=options.count, default=None)
    tr.add_argument("--max-pairs", type=options.count, default=None,
                    help="at most this many training pairs per objective (realprefs: a small run)")
    tr.add_argument("--estimate", action="store_true",
                    help="time a few steps and print the projected cost; train nothing (realprefs)")

    run = sub.add_parser("run", help="measure a reward model and write bundles/<study>/")
    run.add_argument("--model", default="organism",
                     help="'organism', a local model folder, or a hub id already in the local cache")
    run.add_argument("--study", type=options.study_name, default=DEFAULT_STUDY,
                     help="study name ([a-z0-9][a-z0-9_-]*): writes bundles/<study>/")
    run.add_argument("--out", type=options.folder, default=None,
                     help="bundle folder: new, or a bundle this command wrote (default bundles/<study>)")
    run.add_argument("--device", type=options.device, default="cpu", help="cpu, cuda, cuda:1, ...")
    run.add_argument("--dtype", default="float32", choices=DTYPES)
    run.add_argument("--dimensions", type=options.names, default=None, help="comma-separated subset of dimensions")
    run.add_argument("--max-pairs", type=options.count, default=None, help="at most this many pairs per dimension")
    run.add_argument("--pairs", type=options.input_file, default=None,
                     help="pairs JSONL (dimension, pair_id, seed_id, prompt, chosen, rejected); "
                          "default the model folder's pairs.jsonl, else models/organism/pairs.jsonl")
    run.add_argument("--key", type=options.input_file, default=None,
                     help="answer key JSON (default the model folder's key.json, if it has one)")
    run.add_argument("--objective", type=options.whole, default=0, help="score head row (multi-objective heads)")
    run.add_argument("--shard-size", type=options.count, default=8, help="pairs per resumable shard")
    run.add_argument("--max-rows", type=options.count, default=512, help="sequences per patched batch")
    run.add_argument("--no-head-patching", action="store_true",
                     help="patch attn/mlp only (heads are still attributed); for big models")
    run.add_argument("--threads", type=options.threads, default=1, help="torch CPU threads (results depend on it)")
    run.add_argument("--seed", type=options.seed, default=0)
    run.add_argument("--runs-dir", type=options.folder, default=None,
                     help="where resumable shards go (default measure_runs/)")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--ray", nargs="?", const="local", default=None, metavar="auto|ADDRESS",
                     help="measure the shards on Ray: bare, a local instance; 'auto' or an address, a "
                          "running cluster (one worker per GPU); needs the 'scale' extra")
    run.add_argument("--ray-cpus", type=options.count, default=None, help="CPUs of a local Ray instance")
    from measure.runner.plan import add_arguments as add_plan_arguments
    add_plan_arguments(sub.add_parser("plan", help="estimate a study's work, memory and wall time"))
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the command; 0 on success, 2 (one line on stderr) on bad input."""
    try:
        args = parser().parse_args(argv)
    except options.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from measure.errors import MeasureError
    try:
        if args.command == "train":
            from measure.runner.preflight import check_writable
            from measure.studies import TRAINERS, resolve
            if args.out is not None:
                check_writable(args.out, "--out")  # before the trainer loads or computes anything
            return resolve(TRAINERS[args.model])(args.out, args.seed, args.epochs,
                                                 max_pairs=args.max_pairs, estimate=args.estimate)
        if args.command == "plan":
            from measure.runner.plan import run_from_args
            return run_from_args(args)
        from measure.runner.config import StudyConfig
        from measure.runner.run import run_study
        runner = run_study
        if args.ray:
            from functools import partial

            from measure.runner.ray_runner import run_study_ray
            runner = partial(run_study_ray, address=args.ray, local_cpus=args.ray_cpus)
        result = runner(StudyConfig(
            model=args.model, study=args.study, out=args.out, device=args.device, dtype=args.dtype,
            dimensions=args.dimensions,
            max_pairs=args.max_pairs, pairs_file=args.pairs, key_file=args.key,
            objective=args.objective, shard_size=args.shard_size, max_rows=args.max_rows,
            threads=args.threads, seed=args.seed, runs_dir=args.runs_dir,
            patch_heads=not args.no_head_patching, progress=not args.no_progress))
        g = result["golden"]
        print(f"wrote {result['out']} ({result['computed']} shards computed, "
              f"{result['resumed']} resumed) in {result['manifest']['wall_time_s']:.1f} s")
        print(f"mean rho {g['mean_rho']}; per dimension {g['per_dimension_rho']}")
        if g.get("key_recovery"):
            o = g["key_recovery"]["overall"]
            print(f"key recovery AUC: attribution {o['attribution_auc']:.3f} {o['attribution_ci']}, "
                  f"patching {o['patching_auc']:.3f} {o['patching_ci']}")
        return 0
    except MeasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
