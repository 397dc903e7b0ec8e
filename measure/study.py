"""Run one study: load the model, measure every pair shard by shard, write the bundle.

Shards are written atomically under `measure_runs/<study>/<fingerprint>/`, so a killed run
resumes from its completed shards; the fingerprint covers everything that changes the numbers
(model weights, pairs, dtype, device type, shard layout), so a changed input never reuses stale
shards. Everything but `manifest.json` is byte-identical between two runs with the same seed.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path

import torch

from site_src.files import git_state, write_atomic

from . import offdist
from .adapter import load
from .errors import MeasureError
from .instruments import MODES, StatsAccumulator
from .jsonio import json_text, jsonl_text, read_jsonl, sha256_file
from .readme import bundle_readme
from .rows import attribution_gap, shard_rows
from .summary import golden

REPO = Path(__file__).resolve().parent.parent
ORGANISM_DIR = REPO / "models" / "organism"
TOLERANCE = 1e-06
FILES = {"attribution": "attribution_per_pair.jsonl", "attribution_heads": "heads_attribution_per_pair.jsonl",
         "patching": "patching_per_pair.jsonl", "patching_heads": "heads_patching_per_pair.jsonl",
         "lens": "lens_per_pair.jsonl"}
HASH_LIMIT = 4 << 30
STATS_LAYOUT = "per-component statistics (head_L{i}_H{j})"  # in the fingerprint: stats.pt's layout


class ModelSource:
    """What a model folder may ship beside its weights, used by default when present: the study's
    pairs (`pairs.jsonl`), an answer key (`key.json`) and a training report whose
    `heldout_accuracy` the summary records (`training.json`). The organism ships all three."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.pairs = self._file("pairs.jsonl")
        self.key = self._file("key.json")
        self.training = self._file("training.json")

    def _file(self, name: str) -> Path | None:
        path = self.folder / name
        return path if path.is_file() else None


def _shown(path: Path) -> str:
    """A path as the manifest shows it: repository-relative when inside the repository."""
    path = Path(path)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


class Interrupted(RuntimeError):
    """Raised by `stop_after_shards` (tests simulate a killed run with it)."""


def setup_determinism(seed: int, threads: int, device: str) -> None:
    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=device.startswith("cuda"))


def load_pairs(path: Path, dimensions: list[str] | None, max_pairs: int | None) -> list[dict]:
    rows = read_jsonl(path)
    for number, r in enumerate(rows, start=1):
        missing = [f for f in ("dimension", "pair_id", "seed_id", "prompt", "chosen", "rejected") if f not in r]
        if missing:
            raise MeasureError(f"{path}:{number}: pair lacks {', '.join(missing)}")
    known = list(dict.fromkeys(r["dimension"] for r in rows))
    if dimensions:
        unknown = [d for d in dimensions if d not in known]
        if unknown:
            raise MeasureError(f"--dimensions: {', '.join(unknown)} not in {path} "
                               f"(it has {', '.join(known)})")
        rows = [r for r in rows if r["dimension"] in dimensions]
    if max_pairs:
        kept, seen = [], {}
        for r in rows:
            seen[r["dimension"]] = seen.get(r["dimension"], 0) + 1
            if seen[r["dimension"]] <= max_pairs:
                kept.append(r)
        rows = kept
    return [{k: r[k] for k in ("dimension", "pair_id", "seed_id", "prompt", "chosen", "rejected")}
            for r in rows]


def weights_identity(folder: Path) -> dict:
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    total = sum(f.stat().st_size for f in files)
    if files and total <= HASH_LIMIT:
        digest = hashlib.sha256()
        for f in files:
            digest.update(f.name.encode() + b"\0" + sha256_file(f).encode() + b"\n")
        return {"weights_sha256": digest.hexdigest(), "weights_hash": "sha256 over each weight file's name and sha256"}
    listing = "".join(f"{f.name}\0{f.stat().st_size}\n" for f in files)
    return {"weights_sha256": hashlib.sha256(listing.encode()).hexdigest(),
            "weights_hash": f"sha256 of file names and sizes (weights over {HASH_LIMIT >> 30} GiB are not read)"}


def git_commit() -> dict:
    head, dirty = git_state(REPO)
    return {"commit": head, "dirty": dirty}


def versions() -> dict:
    import importlib.metadata as md
    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "safetensors", "tqdm", "numpy"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _save_stats(path: Path, stats) -> None:
    buffer = io.BytesIO()
    torch.save({"mean": stats.mean, "std": stats.std, "folds": stats.folds,
                "offdist": {k: offdist.to_state(v) for k, v in (stats.offdist or {}).items()}}, buffer)
    write_atomic(path, buffer.getvalue())


def run_study(model: str = "organism", study: str = "organism", out: Path | None = None,
              device: str = "cpu", dtype: str = "float32", dimensions: list[str] | None = None,
              max_pairs: int | None = None, pairs_file: Path | None = None, key_file: Path | None = None,
              organism_dir: Path = ORGANISM_DIR, runs_dir: Path | None = None, shard_size: int = 8,
              max_rows: int = 512, threads: int = 1, seed: int = 0, objective: int = 0,
              progress: bool = True, stop_after_shards: int | None = None,
              patch_heads: bool = True) -> dict:
    from tqdm import tqdm

    started = time.time()
    git = git_commit()  # before the run writes the bundle, which would make the tree look dirty
    setup_determinism(seed, threads, device)
    out = Path(out) if out else REPO / "bundles" / study
    runs_dir = Path(runs_dir) if runs_dir else REPO / "measure_runs"
    adapter = load(model, organism_dir, device, dtype, objective)
    model_dir = adapter.path
    source = ModelSource(model_dir)
    pairs_file = Path(pairs_file) if pairs_file else source.pairs or organism_dir / "pairs.jsonl"
    pairs = load_pairs(pairs_file, dimensions, max_pairs)
    if not pairs:
        raise MeasureError(f"{pairs_file}: no pairs to measure")
    if key_file is None:
        key_file = source.key
    key = json.loads(Path(key_file).read_text(encoding="utf-8")) if key_file else None
    pairs_text = jsonl_text(pairs)
    identity = {"model": adapter.model_id, **weights_identity(model_dir),
                "data_sha256": hashlib.sha256(pairs_text.encode()).hexdigest(),
                "seed": seed, "dtype": str(adapter.dtype).replace("torch.", ""),
                "device_type": adapter.device.type, "objective": objective}
    fingerprint = hashlib.sha256(json.dumps(
        [identity, shard_size, max_rows, list(MODES), patch_heads, versions()["torch"], STATS_LAYOUT,
         offdist.VERSION], sort_keys=True).encode()
    ).hexdigest()[:16]
    run_dir = runs_dir / study / fingerprint
    seqs = []
    for p in pairs:
        where = f"{pairs_file} (pair {p['pair_id']})"
        seqs.append((adapter.encode(p["prompt"], p["chosen"], where),
                     adapter.encode(p["prompt"], p["rejected"], where)))
    shards = [list(range(s, min(s + shard_size, len(pairs)))) for s in range(0, len(pairs), shard_size)]

    def shard_input(shard):
        return [pairs[i] for i in shard], [t for i in shard for t in seqs[i]]

    stats_path = run_dir / "stats.pt"
    if stats_path.exists():
        saved = torch.load(stats_path, map_location=adapter.device)
        from .instruments import ActivationStats
        stats = ActivationStats(saved["mean"], saved["std"],
                                {k: offdist.from_state(v) for k, v in saved["offdist"].items()} or None,
                                saved["folds"])
    else:
        acc = StatsAccumulator()
        for shard in tqdm(shards, desc="clean pass (means)", disable=not progress):
            _pairs, shard_seqs = shard_input(shard)
            batch = adapter.batch(shard_seqs)
            with torch.no_grad():
                acc.add(adapter, batch, adapter.clean_run(batch))
        stats = acc.finish(seeds=[p["seed_id"] for p in pairs])
        _save_stats(stats_path, stats)

    computed = resumed = 0
    kill_after = int(os.environ.get("MEASURE_TEST_KILL_AFTER_SHARDS", "0"))
    for k, shard in enumerate(tqdm(shards, desc=f"measuring {study}", disable=not progress)):
        path = run_dir / f"shard_{k:05d}.json"
        if path.exists():
            resumed += 1
            continue
        if stop_after_shards is not None and computed >= stop_after_shards:
            raise Interrupted(f"stopped after {computed} shards")
        shard_pairs, shard_seqs = shard_input(shard)
        with torch.no_grad():
            rows = shard_rows(adapter, shard_pairs, shard_seqs, stats, max_rows,
                              patch_heads=patch_heads)
        write_atomic(path, json.dumps(rows, ensure_ascii=False) + "\n")
        computed += 1
        if kill_after == computed:  # tests: die like a killed job, with no cleanup at all
            os.kill(os.getpid(), signal.SIGKILL)

    files = {name: [] for name in FILES}
    for k in range(len(shards)):
        data = json.loads((run_dir / f"shard_{k:05d}.json").read_text(encoding="utf-8"))
        for name in FILES:
            files[name].extend(data[name])
    out.mkdir(parents=True, exist_ok=True)
    for name, filename in FILES.items():
        write_atomic(out / filename, jsonl_text(files[name]))
    write_atomic(out / "pairs.jsonl", pairs_text)
    written = {name: read_jsonl(out / filename) for name, filename in FILES.items()}
    gap = attribution_gap(written["attribution"])
    extra = {"attribution_sum_gap": gap}
    if source.training is not None:
        training = json.loads(source.training.read_text(encoding="utf-8"))
        extra["organism_heldout_accuracy"] = training["heldout_accuracy"]
    if key is not None:
        write_atomic(out / "key.json", json_text(key))
    summary = golden(study, adapter.model_id, identity, written, key, TOLERANCE, extra)
    write_atomic(out / "golden.json", json_text(summary))
    write_atomic(out / "README.md", bundle_readme(study, summary, key is not None))
    manifest = {
        "study": study, **identity,
        "model_config": dict(json.loads(adapter.model.config.to_json_string(use_diff=False)),
                             _name_or_path=adapter.model_id),  # not this machine's path
        "seeds": {"torch": seed, "pairs_generator": f"see {_shown(source.training)}" if source.training else None,
                  "bootstrap": 0},
        "data_file": _shown(pairs_file),
        "packages": versions(), "device": str(adapter.device), "threads": threads,
        "shard_size": shard_size, "patch_heads": patch_heads, "shards": len(shards), "shards_resumed": resumed,
        "run_fingerprint": fingerprint, "git": git,
        "wall_time_s": round(time.time() - started, 3),
        # the arguments only: the interpreter's path would name this machine's folders
        "command": "python -m measure " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("__main__.py") else None,
    }
    write_atomic(out / "manifest.json", json.dumps(manifest, indent=2, default=str) + "\n")
    return {"out": out, "golden": summary, "manifest": manifest, "computed": computed, "resumed": resumed}
