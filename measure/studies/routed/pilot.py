"""`python -m measure.studies.routed.pilot [--seed N] [--keyed RULE] [...]`: train one routed
organism with the pilot salt (public, never a study's) and print its key validation.

The pilot tells whether the design can make keys that pass the validation before any study salt
is drawn; its organisms are not study organisms (docs/routed.md)."""
from __future__ import annotations

import argparse
import hashlib
import tempfile

PILOT_SALT = hashlib.sha256(b"routed-pilot: not a study salt").digest()


def main(argv=None) -> int:
    """Train the pilot organism the flags describe and print its validation; exit status 0 when
    its key passes, 1 when the organism is void."""
    from measure.studies.routed import train
    from measure.studies.routed.keys import RULES

    s = train.SETTINGS
    ap = argparse.ArgumentParser(prog="python -m measure.studies.routed.pilot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keyed", choices=RULES, help="the rule planted in the key (default: the seed's rule)")
    ap.add_argument("--epochs", type=int, default=s["epochs"], help="epochs of the key phase")
    ap.add_argument("--background-epochs", type=int, default=s["background_epochs"])
    ap.add_argument("--lr", type=float, default=s["learning_rate"])
    ap.add_argument("--key-size", type=int, default=s["key_size"],
                    help="components per key: one head and this many minus one more heads or MLPs")
    ap.add_argument("--relay-weight", type=float, default=s["relay_weight"])
    ap.add_argument("--member-share", type=float, default=s["member_share"])
    ap.add_argument("--check-per-rule", type=int, default=s["check_per_rule"])
    args = ap.parse_args(argv)
    settings = {"epochs": args.epochs, "background_epochs": args.background_epochs, "learning_rate": args.lr,
                "key_size": args.key_size, "relay_weight": args.relay_weight, "member_share": args.member_share,
                "check_per_rule": args.check_per_rule}
    if args.keyed:
        settings["keyed"] = args.keyed
    with tempfile.TemporaryDirectory(prefix="routed-pilot-") as folder:
        report = train.build(folder, args.seed, PILOT_SALT, settings)
    rule, v = report["keyed"], report["validation"]
    r = v[rule]
    n_bg = args.background_epochs
    print(f"seed {args.seed}, keyed rule {rule}: background loss "
          + " ".join(f"{x:.3f}" for x in report["epoch_loss"][:n_bg]) + "; key loss "
          + " ".join(f"{x:.3f}" for x in report["epoch_loss"][n_bg:]))
    print("held-out accuracy: " + ", ".join(f"{d} {x:.2f}" for d, x in report["heldout_accuracy"].items()))
    shares = ", ".join(f"{c} {x:.2f}" for c, x in r["member_share"].items())
    print(f"key {' + '.join(r['key'])}: margin {r['clean_margin']:.3f}, necessity {r['necessity']:.2f}, "
          f"sufficiency {r['sufficiency']:.2f}, leak {r['leak']:.2f} ({r['leak_component']}); "
          f"member shares {shares}; {'passes' if r['passes'] else 'fails'}")
    print(f"null rule: mean clean margin {v['null']['clean_margin']:.4f}; organism {'valid' if v['valid'] else 'void'}")
    return 0 if v["valid"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
