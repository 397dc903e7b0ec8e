"""`python -m measure.studies.planted build | verify | run`: the planted organisms and their study."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import os

from measure import numerics

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
numerics.set_environment()  # the portable numerics mode, before anything imports torch

from bundle_kit import keyrecovery  # noqa: E402
from measure.errors import MeasureError  # noqa: E402
from measure.runner.config import REPO  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """The command line; exit status 0, 1 when a key check fails, 2 for an error."""
    from measure.studies.planted import organisms as org
    from measure.studies.planted import study, verify

    parser = argparse.ArgumentParser(prog="python -m measure.studies.planted", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("build", "verify", "run"),
                        help="build: (re)write every organism and check its sha256; verify: the key check; "
                             "run: the whole study into --out")
    parser.add_argument("--out", type=Path, default=REPO / "bundles" / study.STUDY)
    parser.add_argument("--runs-dir", type=Path, default=None)
    parser.add_argument("--resamples", type=int, default=keyrecovery.BOOTSTRAP["resamples"])
    args = parser.parse_args(argv)
    if args.resamples < 1:
        parser.error("--resamples must be at least 1")
    try:
        numerics.enter(1)
        if args.command == "build":
            for family, seed in org.ORGANISMS:
                folder = org.organism_dir(family, seed)
                record = folder / "construction.json"
                expected = json.loads(record.read_text(encoding="utf-8"))["weights_sha256"] if record.exists() else None
                got = org.build(family, seed, folder)["weights_sha256"]
                if expected is not None and got != expected:
                    raise MeasureError(f"{record}: the rebuilt weights hash to {got[:16]}..., not {expected[:16]}...")
                print(f"{folder.name}: sha256 {got[:16]}")
            return 0
        if args.command == "verify":
            result = verify.verify_all(org.ORGANISMS)
            for organism, rules in result["per_organism"].items():
                for rule, r in rules.items():
                    print(f"{organism} {rule:10s} {r['mechanism']:15s} worst {r['worst']:.6f} "
                          f"{'pass' if r['passes'] else 'FAIL'}")
            print(f"{result['checks']} checks, worst {result['worst_deviation']:.6f} ({result['worst_check']}), "
                  f"tolerance {result['tolerance']}")
            return 0 if result["all_pass"] else 1
        result = study.run(args.out, args.runs_dir, bootstrap={"resamples": args.resamples}, progress=True)
    except MeasureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    kr = result["golden"]["key_recovery"]
    for name, block in kr["headline"].items():
        print(f"{name:12s} {block['value']:+.3f} {block['ci']}")
    for name, block in kr["spec_curve"].items():
        print(f"{block['conclusion']}: {block['share']:.3f} of {block['specifications']}")
    print(f"validity failed: {result['golden']['validity']['failed']}; wall {result['manifest']['wall_time_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
