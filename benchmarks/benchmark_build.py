"""Build times an author waits for, side by side in one run, on a generated 100-page site.

The site is this repository's (its real studies, figures, bundles and registrations, cloned from
the committed HEAD into a temporary folder, so nothing here is touched) plus N generated prose
pages, each with headings, a dozen value references into the organism study's fixtures and a
table block. Every build runs `build.py` in a fresh interpreter, as an author would:

- cold:      no cache at all (no figure SVGs, no page cache), the whole site;
- no-op:     the same command again with nothing changed;
- edit:      one sentence of one generated page changed, then the same command;
- marginal:  clean builds (`--clean`, warm figure cache) of the site without and with the N pages,
             from two clones, one after the other in each round: the median over rounds of
             (with - without) / N is the cost of one more page (a difference of two builds of
             seconds each: taken within a round, the machine's drift between rounds cancels);
- serve:     the same edit saved while `build.py serve` runs: seconds until the rebuilt site is
             swapped in (the server notices changes by polling every 0.1 s, serve.POLL_S; that is included).

If MkDocs is installed (the `bench` extra: `pip install -e '.[bench]'`), the same N pages, with
their references written out as plain numbers, are built by `mkdocs build` in the same run, and
every figure is printed as a ratio to it beside its target (issue 29): cold build at most 6x
MkDocs' build, a one-page edit at most 1.0x (under `serve` 1.1x), a no-op at most 0.25x, and each
further page at most MkDocs' cost per page. The CPU seconds (user + system, this process's
children included) are printed beside the wall-clock ones: on a shared machine the wall clock is
inflated by whatever else runs (the load average is printed), the CPU time much less so.
Compiled modules are kept between builds (PYTHONDONTWRITEBYTECODE is unset for the builds), as
an author's Python keeps them.

    .venv/bin/python benchmarks/benchmark_build.py [--pages 100] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the most each may take, as a multiple of MkDocs' build of the same pages in the same run (issue 29)
RATIO_TARGETS = {"cold": 6.0, "edit": 1.0, "serve": 1.1, "no-op": 0.25}
MARGINAL_RATIO_TARGET = 1.0   # this generator's cost of one more page / MkDocs' cost per page

REFERENCES = [
    ("the mean rank correlation", "{{ bundles/organism/golden.json#mean_rho | fmt +.3f minus }}"),
    ("the number of pairs", "{{ bundles/organism/golden.json#counts/pairs }}"),
    ("the distinct seeds", "{{ bundles/organism/golden.json#counts/n_effective }}"),
    ("the components compared", "{{ bundles/organism/golden.json#counts/components_ranked_both }}"),
    ("the attribution rows", "{{ bundles/organism/attribution_per_pair.jsonl | count }}"),
    ("the pairs whose margin is negative", "{{ bundles/organism/attribution_per_pair.jsonl | count margin < 0 }}"),
    ("the mean margin", "{{ bundles/organism/attribution_per_pair.jsonl | mean margin | fmt .3f }}"),
    ("the largest attribution", "{{ bundles/organism/attribution_per_pair.jsonl | max attribution | fmt .4f }}"),
    ("the published Skywork mean", "{{ quoted/reward-lens-e04.json#mean_rho/Skywork-Reward-Llama-3.1-8B-v0.2 | fmt +.3f minus }}"),
    ("the published ArmoRM mean", "{{ quoted/reward-lens-e04.json#mean_rho/ArmoRM-Llama3-8B-v0.1 | fmt +.3f minus }}"),
    ("the quoted dimensions", "{{ quoted/reward-lens-e04.json#dimensions }}"),
    ("the tolerance", "{{ quoted/reward-lens-e04.json#tolerance }}"),
]


def page_text(i: int, plain: dict | None = None, edited: bool = False) -> str:
    """One generated page; with `plain`, references are written as their values (for MkDocs)."""
    def ref(text: str) -> str:
        return plain[text] if plain is not None else text
    lines = ["---", f"title: Generated note {i:03d}", f"summary: A generated prose page, number {i}, for the build benchmark.", "---", ""]
    if plain is not None:
        lines = [f"# Generated note {i:03d}", ""]
    for section in range(3):
        lines += [f"## Section {section + 1} of note {i}", ""]
        for k in range(4):
            what, expr = REFERENCES[(i + section * 4 + k) % len(REFERENCES)]
            extra = " This sentence was edited." if edited and section == 0 and k == 0 else ""
            lines.append(f"In this paragraph {what} is {ref(expr)}, read from a committed fixture when the "
                         f"site is built, and shown with its receipt.{extra}")
        lines.append("")
    if plain is None:
        lines += ["```table", "source: bundles/organism/golden.json#per_dimension_rho",
                  "columns: [dimension, Spearman rho]", "fmt: +.3f minus", "```", ""]
    else:
        lines += ["| dimension | Spearman rho |", "| --- | --- |"] + [f"| {k} | {v} |" for k, v in plain["_table"]] + [""]
    return "\n".join(lines)


CPU: dict[str, list[float]] = {}   # label -> CPU seconds of each run (user + system, children included)


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(label: str, command: list[str]) -> float:
    """Wall seconds of one command; its CPU seconds (with its own children's) go to CPU[label]."""
    cpu = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    took = time.perf_counter() - started
    CPU.setdefault(label, []).append(_children_cpu() - cpu)
    if proc.returncode != 0:
        sys.exit(f"{label} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return took


def build(root: Path, out: Path, *extra: str, label: str = "") -> float:
    return timed(label or " ".join(extra) or "build",
                 [sys.executable, str(root / "build.py"), "--root", str(root), "--out", str(out), *extra])


def serve_edit_times(root: Path, out: Path, note: Path, index: int, repeat: int) -> list[float]:
    """Seconds from saving an edit to `build.py serve` having rebuilt and swapped the site in (what
    the open page's live reload waits for): the server polls every 0.1 s (serve.POLL_S), so this includes the
    time to notice the change. The state is read from its /__serve/state endpoint."""
    import json
    import re
    import urllib.request

    proc = subprocess.Popen([sys.executable, str(root / "build.py"), "--root", str(root), "--out", str(out),
                             "serve", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        for line in proc.stdout:   # the first build, then the address
            found = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
            if found:
                url = found.group(1) + "__serve/state"
                break
        if url is None:
            sys.exit("serve did not start")

        def state() -> dict:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        times = []
        for r in range(repeat):
            before = state()["build"]
            time.sleep(0.5)   # a fresh mtime, and the poller idle
            started = time.time()
            note.write_text(page_text(index, edited=r % 2 == 1), encoding="utf-8")
            while (now := state())["build"] == before:
                if time.time() - started > 60:
                    sys.exit("serve did not rebuild within 60 s")
                time.sleep(0.005)
            if not now["ok"]:
                sys.exit(f"the serve rebuild failed: {now['errors'][:3]}")
            times.append(now["finished_ms"] / 1000 - started)
        return times
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def clone(dest: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--shared", str(REPO), str(dest)], check=True)
    return dest


def add_pages(root: Path, n: int) -> None:
    folder = root / "content" / "notes"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"note-{i:03d}.md").write_text(page_text(i), encoding="utf-8")
    # the build publishes only files git tracks
    subprocess.run(["git", "-C", str(root), "add", "content/notes"], check=True)


def resolved_values(root: Path) -> dict:
    """The value each reference shows, for the MkDocs copy (resolved by the generator itself)."""
    code = ("import json,sys; sys.path.insert(0, sys.argv[1]); from site_src.resolve import Resolver;"
            "r = Resolver(__import__('pathlib').Path(sys.argv[1]), None);"
            "refs = json.loads(sys.argv[2]); out = {e: r.resolve(e[3:-3]).display for e in refs};"
            "b = r.resolve('bundles/organism/golden.json#per_dimension_rho');"
            "out['_table'] = [[str(k), v.display] for k, v in b.items]; print(json.dumps(out))")
    import json
    proc = subprocess.run([sys.executable, "-c", code, str(root), json.dumps([e for _, e in REFERENCES])],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def mkdocs_times(tmp: Path, n: int, plain: dict, repeat: int) -> tuple[float, float] | None:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        return None
    site = tmp / "mkdocs"
    (site / "docs").mkdir(parents=True)
    (site / "docs" / "index.md").write_text("# Generated notes\n\nThe benchmark's pages.\n")
    for i in range(n):
        (site / "docs" / f"note-{i:03d}.md").write_text(page_text(i, plain), encoding="utf-8")
    (site / "mkdocs.yml").write_text("site_name: Benchmark\nuse_directory_urls: true\n")
    times = [timed("mkdocs", [sys.executable, "-m", "mkdocs", "build", "--quiet", "--clean", "-f",
                              str(site / "mkdocs.yml"), "-d", str(tmp / "mkdocs-out")]) for _ in range(repeat)]
    return statistics.median(times), statistics.median(times) / (n + 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=100, help="generated prose pages (default 100)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each timing (median; default 3)")
    args = parser.parse_args(argv)
    # Builds run as an author's Python runs them, keeping compiled modules (the installed MkDocs
    # ships them already); with this variable set, every build of the fresh clone would compile
    # the generator's modules from source again. A cold build still compiles them once.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    load_before = os.getloadavg()
    results: dict[str, list[float]] = {"cold": [], "no-op": [], "edit": [], "base": [], "full": [], "serve": []}
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp_name:
        tmp = Path(tmp_name)
        root = clone(tmp / "repo")
        bare = clone(tmp / "bare")   # the same site without the generated pages
        base_pages = sum(1 for _ in (root / "content").rglob("*.md"))
        add_pages(root, args.pages)
        # marginal cost: clean builds with a warm figure cache, without and with the generated pages
        build(bare, tmp / "warmup")
        build(root, tmp / "warmup2")
        for _ in range(args.repeat):
            results["base"].append(build(bare, tmp / "base", "--clean", label="base"))
            results["full"].append(build(root, tmp / "full", "--clean", label="full"))
        edit_index = min(7, args.pages - 1)
        note = root / "content" / "notes" / f"note-{edit_index:03d}.md"
        for r in range(args.repeat):
            shutil.rmtree(root / ".cache", ignore_errors=True)
            out = tmp / f"site-{r}"
            results["cold"].append(build(root, out, label="cold"))
            results["no-op"].append(build(root, out, label="no-op"))
            note.write_text(page_text(edit_index, edited=r % 2 == 0), encoding="utf-8")
            results["edit"].append(build(root, out, label="edit"))
        results["serve"] = serve_edit_times(root, tmp / "site-serve", note, edit_index, args.repeat)
        plain = resolved_values(root)
        mk = mkdocs_times(tmp, args.pages, plain, args.repeat)
    load_after = os.getloadavg()
    med = {k: statistics.median(v) for k, v in results.items()}
    cpu = {k: statistics.median(v) for k, v in CPU.items()}
    marginal_ms = statistics.median(f - b for f, b in zip(results["full"], results["base"])) / args.pages * 1000
    marginal_cpu_ms = statistics.median(f - b for f, b in zip(CPU["full"], CPU["base"])) / args.pages * 1000
    print(f"site: this repository's {base_pages} content pages (and the pages it derives from them) + {args.pages}"
          f" generated pages; median of {args.repeat}; wall seconds (CPU seconds)")
    rows = (("cold", "cold build (no caches)"), ("no-op", "no-op rebuild"), ("edit", "one-page edit"))
    for key, label in rows:
        print(f"  {label:<24} {med[key]:6.2f} s ({cpu[key]:5.2f} s CPU)   runs: " + ", ".join(f"{t:.2f}" for t in results[key]))
    print(f"  one-page edit under `build.py serve` (saved -> rebuilt, polling included) {med['serve']:.2f} s   runs: "
          + ", ".join(f"{t:.2f}" for t in results["serve"]))
    print(f"  clean build (--clean, warm figure cache) {med['base']:.2f} s ({cpu['base']:.2f} s CPU);  with {args.pages}"
          f" more pages: {med['full']:.2f} s ({cpu['full']:.2f} s CPU)")
    print(f"  marginal cost per page   {marginal_ms:6.1f} ms ({marginal_cpu_ms:.1f} ms CPU)")
    print(f"  ratios: cold / no-op {med['cold'] / med['no-op']:.1f}x, cold / edit {med['cold'] / med['edit']:.1f}x")
    if mk is None:
        print("MkDocs: not installed (pip install -e '.[bench]'); no side-by-side, no ratio to check against its targets")
    else:
        total, per_page = mk
        mk_cpu = cpu["mkdocs"]
        print(f"MkDocs {__import__('mkdocs').__version__} (default theme), the same {args.pages} pages with plain numbers:"
              f" {total:.2f} s ({mk_cpu:.2f} s CPU), {per_page * 1000:.1f} ms per page (it has no incremental build)")
        print("against MkDocs' build of the same pages, in this run (issue 29's targets): wall-clock ratio (CPU ratio)")
        missed = []
        for key, label in rows + (("serve", "one-page edit under serve"),):
            ratio = med[key] / total
            cpu_ratio = f" ({cpu[key] / mk_cpu:.2f}x CPU)" if key in cpu else ""
            ok = ratio <= RATIO_TARGETS[key]
            missed += [] if ok else [key]
            print(f"  {label:<26} {ratio:6.2f}x{cpu_ratio:<14} target <= {RATIO_TARGETS[key]:g}x: "
                  + ("ok" if ok else f"MISSED by {ratio / RATIO_TARGETS[key]:.2f}x"))
        ratio = marginal_ms / (per_page * 1000)
        cpu_ratio = marginal_cpu_ms / (mk_cpu / (args.pages + 1) * 1000)
        ok = ratio <= MARGINAL_RATIO_TARGET
        missed += [] if ok else ["marginal"]
        print(f"  {'cost of one more page':<26} {ratio:6.2f}x ({cpu_ratio:.2f}x CPU)   target <= {MARGINAL_RATIO_TARGET:g}x"
              f" MkDocs' per page: " + ("ok" if ok else f"MISSED by {ratio / MARGINAL_RATIO_TARGET:.2f}x"))
        print(f"  targets met: {5 - len(missed)} of 5" + (f" (missed: {', '.join(missed)})" if missed else ""))
    print(f"load average (1, 5, 15 min) before {tuple(round(x, 2) for x in load_before)}, after "
          f"{tuple(round(x, 2) for x in load_after)}, on {os.cpu_count()} cores: timings on a loaded machine are inflated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
