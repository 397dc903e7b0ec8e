"""What verifying the output costs a no-op build: `up_to_date` (site_src/incremental.py) on this
repository's site, side by side with the same check with its content verification (sha256 of
every output file against the digests recorded when it was written) taken out.

The site is built once from a clone of the committed HEAD into a temporary folder (nothing here is
touched); then each variant runs `--repeat` times, alternating, in this process (the page cache
warm, as for an author's second build). The load average is printed; read the ratio.

    .venv/bin/python benchmarks/benchmark_up_to_date.py [--repeat 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from site_src import incremental
    from site_src.site import build
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", "--local", str(REPO), str(root)], check=True)
        out = root / "public"
        assert build(root, out).ok
        assert incremental.up_to_date(root, out) is not None, "the no-op check failed on an unchanged site"
        real = incremental._as_written
        times = {"with content check": [], "without": []}
        for _ in range(args.repeat):
            for name in times:
                incremental._as_written = real if name != "without" else (lambda files, recorded: True)
                start = time.perf_counter()
                same = incremental.up_to_date(root, out)
                times[name].append(time.perf_counter() - start)
                assert same is not None, name
        incremental._as_written = real
        size = sum(p.stat().st_size for p in Path(os.path.realpath(out)).rglob("*") if p.is_file())
    with_check, without = (statistics.median(times[k]) for k in times)
    print(f"load average {os.getloadavg()[0]:.2f}; site {size / 1e6:.1f} MB; medians of {args.repeat}")
    print(f"up_to_date with the content check: {with_check:.3f} s; without: {without:.3f} s; "
          f"ratio {with_check / without:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
