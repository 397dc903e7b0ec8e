"""Run one study in three stages: plan the shards, measure the shards, write the bundle.

1. `plan_study(config)` loads the model, reads and checks the pairs, tokenizes them, cuts them
   into shards of `shard_size` pairs and fingerprints everything that changes the numbers
   (model weights, pairs, dtype, device type, shard layout, torch version).
2. `measure_shards(plan, hooks)` runs the clean pass for the mean activations, then measures
   every shard that has no completed result under `measure_runs/<study>/<fingerprint>/` and
   writes its rows there atomically, so a killed run resumes from its completed shards and a
   changed input never reuses stale ones. `measure_shard(plan, stats, k)` is one shard's work.
3. `write_bundle(plan, ...)` (measure/runner/bundle.py) joins the shards into the bundle files, computes
   `golden.json` from the rows as written, and swaps the whole folder into place.

What a study measures beyond the default (its reads, its own files, its summary) is its
`Definition` (measure/runner/definition.py); `run_study(config, hooks)` (measure/runner/run.py) is
the three stages in a row. Everything but `manifest.json` is byte-identical between two runs with
the same seed.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from bundle_kit import contract
from safe_io import git_state, sha256_file, write_atomic

from measure import numerics
from measure.instruments import offdist
from measure.models.adapter import Adapter, load
from measure.runner.config import ORGANISM_DIR, REPO, Hooks, StudyConfig
from measure.errors import MeasureError
from measure.instruments.patching import MODES, ActivationStats, StatsAccumulator
from measure.runner.jsonio import jsonl_text, read_json
from measure.runner.outfolder import check_replaceable
from measure.runner.preflight import check_run
from measure.runner.definition import Definition, definition_for
from measure.runner.reads import Read, files

__all__ = ["StudyConfig", "Hooks", "Plan", "plan_study", "measure_shards", "measure_shard", "joined_rows",
           "second_stage", "FILES", "ORGANISM_DIR", "REPO"]

# The per-pair files of a bundle that reads along the score row, by the key a shard's rows are
# filed under; a plan's own are `plan.files`.
FILES = files([Read()])
HASH_LIMIT = 4 << 30
STATS_LAYOUT = "per-component statistics (head_L{i}_H{j})"  # in the fingerprint: stats.pt's layout


class ModelSource:
    """What a model folder may ship beside its weights, used by default when present: the study's
    pairs (`pairs.jsonl`), an answer key (`key.json`) and a training report whose
    `heldout_accuracy`, if it has one, the summary records (`training.json`). The organism
    ships all three."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.pairs = self._file(contract.PAIRS)
        self.key = self._file(contract.KEY)
        self.training = self._file("training.json")

    def heldout_accuracy(self) -> dict | None:
        """`training.json`'s `heldout_accuracy` ({dimension: accuracy}), if it records one."""
        if self.training is None:
            return None
        report = read_json(self.training, "training report")
        accuracy = report.get("heldout_accuracy") if isinstance(report, dict) else None
        if accuracy is not None and not (isinstance(accuracy, dict) and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in accuracy.values())):
            raise MeasureError(f"{self.training}: heldout_accuracy must map dimensions to numbers")
        return accuracy

    def _file(self, name: str) -> Path | None:
        path = self.folder / name
        return path if path.is_file() else None


def shown(path: Path) -> str:
    """A path as the manifest shows it: repository-relative when inside the repository."""
    path = Path(path)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def setup_determinism(seed: int, threads: int, device: str) -> dict:
    """Seed torch, use deterministic algorithms, and enter the portable numerics mode
    (`measure.numerics`); returns the numerics in effect, for the manifest."""
    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    state = numerics.enter(threads)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=device.startswith("cuda"))
    return state


def weights_identity(folder: Path) -> dict:
    """The sha256 of a model folder's safetensors files (names and sizes only above 4 GiB)."""
    files = sorted(folder.glob("*.safetensors"))  # the only weights ever loaded (adapter.refuse_pickled_weights)
    total = sum(f.stat().st_size for f in files)
    if files and total <= HASH_LIMIT:
        digest = hashlib.sha256()
        for f in files:
            digest.update(f.name.encode() + b"\0" + sha256_file(f).encode() + b"\n")
        return {"weights_sha256": digest.hexdigest(), "weights_hash": "sha256 over each weight file's name and sha256"}
    listing = "".join(f"{f.name}\0{f.stat().st_size}\n" for f in files)
    return {"weights_sha256": hashlib.sha256(listing.encode()).hexdigest(),
            "weights_hash": f"sha256 of file names and sizes (weights over {HASH_LIMIT >> 30} GiB are not read)"}


def versions() -> dict:
    """The versions of Python and the packages that make the numbers."""
    import importlib.metadata as md
    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "safetensors", "tqdm", "numpy"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


# ----- stage 1: the plan ----------------------------------------------------------------------
@dataclass
class Plan:
    """What a study will measure, fixed before any measurement: the loaded model, the pairs and
    their token ids, the shards (lists of pair indices) and where their results go."""
    config: StudyConfig
    adapter: Adapter
    source: ModelSource
    pairs_file: Path
    pairs: list[dict]
    pairs_text: str                                   # pairs.jsonl as the bundle holds it
    seqs: list[tuple[list[int], list[int]]]           # per pair: chosen and rejected token ids
    reads: list[Read]                                 # the directions every pair is read along
    definition: Definition                            # what the study adds to the runner
    shards: list[list[int]]
    key: dict | None
    identity: dict                                    # what makes the numbers (in golden.json)
    fingerprint: str
    run_dir: Path
    started: float = field(default_factory=time.time)
    heldout: dict | None = None                       # the model folder's held-out accuracy, if it records one
    git: dict | None = None                           # the tree's state before the run wrote anything
    numerics: dict | None = None                      # the numerics in effect (measure.numerics)
    payload: object = None                            # a second stage's work (`stage`); None: the first
    base_dir: Path | None = None                      # a second stage's: the first stage's run_dir
    followup: "Plan | None" = None                    # the second stage, once the first has fixed it

    def shard_input(self, k: int) -> tuple[list[dict], list[list[int]]]:
        """Shard k's pairs and their sequences, chosen and rejected interleaved."""
        shard = self.shards[k]
        return [self.pairs[i] for i in shard], [t for i in shard for t in self.seqs[i]]

    def shard_rows_index(self, k: int) -> torch.Tensor:
        """The plan index of the pair of every sequence of shard k (how a read picks directions)."""
        return torch.tensor([i for i in self.shards[k] for _ in (0, 1)])

    @property
    def files(self) -> dict[str, str]:
        """{row kind: file name} of every per-pair file this stage's shards give (the study's
        definition says which; by default its reads')."""
        return self.definition.files(self)

    @property
    def all_files(self) -> dict[str, str]:
        """{row kind: file name} over this stage and its second stage, if any."""
        return {**self.files, **(self.followup.files if self.followup is not None else {})}

    def shard_path(self, k: int) -> Path:
        """Where shard k's rows are saved."""
        return self.run_dir / f"shard_{k:05d}.json"

    @property
    def stats_path(self) -> Path:
        """Where the clean statistics are saved (a second stage uses the first stage's)."""
        return (self.base_dir or self.run_dir) / "stats.pt"

    def stage(self, payload) -> "Plan":
        """The second stage of this plan: the same pairs and shards, the work `payload` fixes
        (the definition's `followup`), its shards under a folder of the first stage's named by
        the payload's digest, so a changed payload never reuses them."""
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
        return replace(self, payload=payload, base_dir=self.run_dir, followup=None,
                       run_dir=self.run_dir / f"stage2-{digest}", fingerprint=f"{self.fingerprint}-{digest}")


def plan_study(config: StudyConfig) -> Plan:
    """Stage 1: load the model, read the pairs (and key), fix the reads and the shards, and
    fingerprint everything that changes the numbers; nothing is measured yet."""
    started = time.time()
    check_replaceable(config.bundle_dir)  # before anything is measured
    check_run(config)  # the folders can be written, the dimensions exist: before anything loads
    head, dirty = git_state(REPO)  # before the run writes the bundle, which would make the tree look dirty
    mode = setup_determinism(config.seed, config.threads, config.device)
    if not numerics.claimed(mode, config.device):
        print(f"warning: {numerics.describe(mode, config.device)}", file=sys.stderr, flush=True)
    definition = definition_for(config.study)
    adapter = load(config.model, config.device, config.dtype, config.objective)
    source = ModelSource(adapter.path)
    pairs_file = Path(config.pairs_file or source.pairs or definition.pairs_file)
    pairs = definition.select(definition.read(pairs_file), config)
    if not pairs:
        raise MeasureError(f"{pairs_file}: no pairs to measure")
    key_file = config.key_file if config.key_file is not None else source.key
    key = _read_key(Path(key_file)) if key_file else None
    heldout = source.heldout_accuracy()  # read now: a broken report is refused before measuring
    seqs = [definition.encode(adapter, p, f"{pairs_file} (pair {p['pair_id']})") for p in pairs]
    pairs, seqs = definition.arrange(pairs, seqs)
    pairs_text = jsonl_text(pairs)
    identity = {"model": adapter.model_id, **weights_identity(adapter.path),
                "data_sha256": hashlib.sha256(pairs_text.encode()).hexdigest(),
                "seed": config.seed, "dtype": str(adapter.dtype).replace("torch.", ""),
                "device_type": adapter.device.type, "objective": config.objective,
                **definition.identity(adapter, pairs)}
    reads = definition.reads(adapter, pairs, config)
    shards = definition.shards(pairs, seqs, config.shard_size)
    # the shard size, or the shards themselves where a study cuts them otherwise
    layout = config.shard_size if shards == Definition.shards(definition, pairs, seqs, config.shard_size) else shards
    fingerprint = hashlib.sha256(json.dumps(
        [identity, layout, config.max_rows, list(MODES), config.patch_heads,
         versions()["torch"], STATS_LAYOUT, offdist.VERSION, _numerics_key(mode),
         [r.fingerprint() for r in reads]], sort_keys=True).encode()).hexdigest()[:16]
    return Plan(config, adapter, source, pairs_file, pairs, pairs_text, seqs, reads, definition, shards, key,
                identity, fingerprint, config.runs_root / config.study / fingerprint, started,
                heldout=heldout, git={"commit": head, "dirty": dirty}, numerics=mode)


def _numerics_key(mode: dict) -> list:
    """What of the numerics mode changes the numbers (in the fingerprint: shards made in another
    mode are never reused)."""
    return [mode["aten_cpu_capability"], mode["mkl_cnr"], mode["onednn"], mode["threads"]]


def _read_key(path: Path) -> dict:
    """An answer key: `{"universe": text, "dimensions": {dimension: {"components": [name, ...]}}}`."""
    key = read_json(path, "answer key")
    if not (isinstance(key, dict) and isinstance(key.get("universe"), str)
            and isinstance(key.get("dimensions"), dict) and all(map(_is_key_entry, key["dimensions"].values()))):
        raise MeasureError(f"{path}: an answer key is an object with a 'universe' text and 'dimensions' "
                           f"mapping each dimension to an object with a 'components' list of names")
    return key


def _is_key_entry(entry) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("components"), list)
            and all(isinstance(c, str) for c in entry["components"]))


# ----- stage 2: measuring the shards ----------------------------------------------------------
def clean_stats(plan: Plan) -> ActivationStats:
    """The mean activations the `mean` mode patches in and the off-distribution references
    `offdist_z` is scored against, over every pair of the study; cached beside the shards."""
    from tqdm import tqdm

    adapter = plan.adapter
    if plan.stats_path.exists():
        return _saved_stats(plan.stats_path, adapter.device)
    acc = StatsAccumulator(heads=any(read.heads and read.patch_heads for read in plan.reads))
    for k in tqdm(range(len(plan.shards)), desc="clean pass (means)", disable=not plan.config.progress):
        batch = adapter.batch(plan.shard_input(k)[1])
        with torch.no_grad():
            acc.add(adapter, batch, adapter.clean_run(batch))
    stats = acc.finish(seeds=[p["seed_id"] for p in plan.pairs])
    buffer = io.BytesIO()
    torch.save({"mean": stats.mean, "std": stats.std, "folds": stats.folds,
                "offdist": {k: offdist.to_state(v) for k, v in (stats.offdist or {}).items()}}, buffer)
    write_atomic(plan.stats_path, buffer.getvalue())
    return stats


def _saved_stats(path: Path, device) -> ActivationStats:
    """The statistics a run saved, read without unpickling anything but tensors and plain data;
    anything else in their place is refused in one line (and left there)."""
    try:
        saved = torch.load(path, map_location=device, weights_only=True)
        return ActivationStats(saved["mean"], saved["std"],
                               {k: offdist.from_state(v) for k, v in saved["offdist"].items()} or None,
                               saved["folds"])
    except Exception as exc:  # whatever torch.load or a missing field raises: the file is not ours
        raise MeasureError(f"{path}: not a statistics file this tool wrote ({type(exc).__name__}); "
                           f"remove it or name another --runs-dir") from None


def measure_shard(plan: Plan, stats: ActivationStats, k: int) -> dict[str, list[dict]]:
    """Every row of shard k, by kind (by default along every read: attribution, patching, lens),
    rounded as they will be written: the study definition's `measure`."""
    with torch.no_grad():
        return plan.definition.measure(plan, stats, k)


def joined_rows(plan: Plan) -> dict[str, list[dict]]:
    """Every row of this stage's shards by kind, in shard order (each shard's file must exist)."""
    rows = {name: [] for name in plan.files}
    for k in range(len(plan.shards)):
        data = json.loads(plan.shard_path(k).read_text(encoding="utf-8"))
        for name in plan.files:
            rows[name].extend(data[name])
    return rows


def second_stage(plan: Plan) -> Plan | None:
    """The plan's second stage, fixed by its definition from the first stage's rows (None when
    the study has none); kept as `plan.followup`."""
    payload = plan.definition.followup(plan, joined_rows(plan))
    plan.followup = None if payload is None else plan.stage(payload)
    return plan.followup


def measure_shards(plan: Plan, hooks: Hooks | None = None) -> dict[str, int]:
    """Measure every shard without a completed result; {"computed": n, "resumed": m}."""
    from tqdm import tqdm

    hooks = hooks or Hooks()
    stats = clean_stats(plan)
    todo = [k for k in range(len(plan.shards)) if not plan.shard_path(k).exists()]
    computed = 0
    for k in tqdm(todo, desc=f"measuring {plan.config.study}", disable=not plan.config.progress):
        rows = measure_shard(plan, stats, k)
        write_atomic(plan.shard_path(k), json.dumps(rows, ensure_ascii=False) + "\n")
        computed += 1
        hooks.shard_done(computed, len(todo))
    return {"computed": computed, "resumed": len(plan.shards) - len(todo)}
