"""`python -m measure.studies.transfer.pilot --seed N [--key-size K]`: plant, check and score one
organism with the pilot salt (public, never the study's) and print what docs/transfer.md's pilot
table shows. Exit status 0."""
from __future__ import annotations

import argparse
import hashlib
import time

PILOT_SALT = hashlib.sha256(b"transfer-pilot: not a study salt").digest()


def main(argv=None) -> int:
    """Run one pilot organism and print its figures."""
    import torch

    from bundle_kit import hiddenkeys
    from measure.studies.organism.train import deterministic
    from measure.studies.transfer import data, plant, score, study

    ap = argparse.ArgumentParser(prog="python -m measure.studies.transfer.pilot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--key-size", type=int, default=plant.SETTINGS["key_size"])
    args = ap.parse_args(argv)
    s = dict(plant.SETTINGS, key_size=args.key_size)
    deterministic(args.seed)
    started = time.time()
    path = study.host_path()
    adapter = study._adapter(path)
    rule, key = study.keyed_rule(args.seed), study.draw_key(args.seed, PILOT_SALT, s)
    check = data.twins("check", args.seed, rule, s["check_twins"], path)
    with torch.no_grad():
        r = plant.top_rewards(adapter, plant.lower_stream(adapter, plant.sequences(check), s["first_layer"]), s["first_layer"])
    print(f"seed {args.seed}, rule {rule}, key {' + '.join(key)}; host margin {float((r[0::2] - r[1::2]).mean()):.3f}")
    losses = plant.fit(adapter, data.twins("train", args.seed, rule, s["train_twins"], path), key, s, args.seed)
    print("loss by epoch " + " ".join(f"{x:.3f}" for x in losses))
    v = score.validate(adapter, check, key, args.seed, s["first_layer"])
    print(f"margin {v['clean_margin']:.3f}, necessity {v['necessity']:.2f}, sufficiency {v['sufficiency']:.2f}, "
          f"leak {v['leak']:.2f} ({v['leak_component']}); shares "
          + ", ".join(f"{c} {x:.2f}" for c, x in v["member_share"].items())
          + f"; valid {study.valid(v, s)}")
    twins = (data.twins("study", args.seed, rule, study.STUDY_TWINS, path)
             + data.twins("study", args.seed, data.NULL_RULE, study.STUDY_TWINS, path))
    a, p = score.blind_rows(adapter, twins, s["first_layer"])
    o = hiddenkeys.organism(a, p, rule, data.NULL_RULE, key, study.draw_decoys(args.seed, PILOT_SALT, key, s))
    print(f"key recovery: attribution {o['attribution']:.3f}, patching {o['patching']:.3f}, gap {o['gap']:+.3f}; "
          f"decoys {o['null']['attribution']:.3f} / {o['null']['patching']:.3f}; "
          f"key on null twins {o['key_on_null']['attribution']:.3f} / {o['key_on_null']['patching']:.3f}")
    keyed = o["scores"]["keyed"]
    for c in sorted(keyed["patching"], key=lambda c: -keyed["patching"][c])[:4]:
        print(f"  {c}: attribution {keyed['attribution'][c]:.3f}, patching {keyed['patching'][c]:.3f}"
              + (" (key)" if c in key else ""))
    print(f"{time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
