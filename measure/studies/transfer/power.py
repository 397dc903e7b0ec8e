"""`python -m measure.studies.transfer.power`: how often the equivalence test could pass, before
any data (registrations/transfer-equivalence.yaml). If the real trunk's per-organism gaps came
from the same distribution as the routed organisms' (bundles/routed), with 50 valid organisms,
the share of simulated studies in which `hiddenkeys.equivalence` says "transfers", per bound."""
from __future__ import annotations

import random

from bundle_kit import hiddenkeys

BOUNDS = (0.05, 0.06, 0.07, 0.08, 0.10)
TRIALS = 200
ORGANISMS = 50


def power(reference: list[float], bound: float, n: int = ORGANISMS, trials: int = TRIALS, seed: int = 0) -> float:
    """The share of `trials` simulated studies (n gaps drawn from `reference`) that pass at `bound`."""
    rng = random.Random(seed)
    interval = dict(hiddenkeys.INTERVAL, resamples=500)
    passed = 0
    for _ in range(trials):
        gaps = [rng.choice(reference) for _ in range(n)]
        passed += hiddenkeys.equivalence(gaps, reference, bound, interval)["verdict"] == "transfers"
    return passed / trials


def main() -> int:
    """Print the power at each of BOUNDS."""
    from measure.studies.transfer.result import reference_gaps

    reference = reference_gaps()
    print(f"routed organisms: {len(reference)} valid, mean gap {sum(reference) / len(reference):+.3f}")
    for bound in BOUNDS:
        print(f"bound {bound:.2f}: passes in {power(reference, bound):.0%} of {TRIALS} simulated studies "
              f"of {ORGANISMS} organisms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
