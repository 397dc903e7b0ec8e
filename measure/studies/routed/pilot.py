"""`python -m measure.studies.routed.pilot [--seed N] [--epochs N] [--lr X]`: train one routed
organism with the pilot salt (public, never a study's) and print its key validation.

The pilot tells whether strict routing can make keys that pass the validation before any study
salt is drawn; its organisms are not study organisms (docs/routed.md)."""
from __future__ import annotations

import argparse
import hashlib
import tempfile

PILOT_SALT = hashlib.sha256(b"routed-pilot: not a study salt").digest()


def main(argv=None) -> int:
    """Train the pilot organism the flags describe and print its validation; exit status."""
    from measure.studies.routed import train
    from measure.studies.routed.keys import RULES

    ap = argparse.ArgumentParser(prog="python -m measure.studies.routed.pilot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=train.SETTINGS["epochs"])
    ap.add_argument("--lr", type=float, default=train.SETTINGS["learning_rate"])
    ap.add_argument("--design", choices=("strict", "penalised", "isolated"), default=train.SETTINGS["design"])
    ap.add_argument("--alone-loss", choices=("bt", "equal"), default=train.SETTINGS["alone_loss"],
                    help="penalised design: the key alone must rank the pair (bt), or the rest adds nothing (equal)")
    ap.add_argument("--keyed", default=",".join(RULES), help="penalised design: the rules given a key (the rest join the background)")
    ap.add_argument("--key-size", type=int, default=train.SETTINGS["key_size"],
                    help="components per key: one head and this many minus one more heads or MLPs")
    ap.add_argument("--alone-weight", type=float, default=train.SETTINGS["alone_weight"],
                    help="isolated design: the weight of the key-alone term (0 leaves only cross-talk)")
    ap.add_argument("--crosstalk-weight", type=float, default=train.SETTINGS["crosstalk_weight"],
                    help="isolated design: the weight of the cross-talk term (0 leaves it out)")
    ap.add_argument("--ramp", type=float, default=train.SETTINGS["penalty_ramp"],
                    help="penalised design: the share of the steps over which the key penalties rise from 0 to full weight")
    args = ap.parse_args(argv)
    keyed = [r for r in args.keyed.split(",") if r]
    if not keyed or any(r not in RULES for r in keyed):
        ap.error(f"--keyed: a comma-separated subset of {', '.join(RULES)}")
    with tempfile.TemporaryDirectory(prefix="routed-pilot-") as folder:
        report = train.build(folder, args.seed, PILOT_SALT, {"epochs": args.epochs, "learning_rate": args.lr,
                                                        "design": args.design,
                                                        "alone_loss": args.alone_loss,
                                                        "keyed": keyed, "penalty_ramp": args.ramp,
                                                        "key_size": args.key_size,
                                                        "alone_weight": args.alone_weight,
                                                        "crosstalk_weight": args.crosstalk_weight})
    v = report["validation"]
    print(f"{args.design} design ({args.alone_loss}, ramp {args.ramp}, keys of {args.key_size}), seed {args.seed}, {args.epochs} epochs, lr {args.lr}: epoch loss "
          + " ".join(f"{x:.3f}" for x in report["epoch_loss"]))
    for rule in keyed:
        r = v[rule]
        shares = ", ".join(f"{c} {x:.2f}" for c, x in r["member_share"].items())
        print(f"{rule:<11} key {' + '.join(r['key'])}: margin {r['clean_margin']:.3f}, necessity {r['necessity']:.2f}, "
              f"sufficiency {r['sufficiency']:.2f}, leak {r['leak']:.2f} ({r['leak_component']}); "
              f"member shares {shares}; {'passes' if r['passes'] else 'fails'}")
    print(f"null rule: mean clean margin {v['null']['clean_margin']:.4f}; organism {'valid' if v['valid'] else 'void'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
