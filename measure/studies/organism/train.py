"""Train the planted-key organism and derive its answer key.

The organism is a small `LlamaForSequenceClassification` trained from scratch with a
Bradley-Terry loss on generated pairs (see organism_data). It is seeded and deterministic: one
thread, deterministic algorithms, a seeded shuffle. Everything lands in `models/organism/`:

- `model.safetensors`, `config.json`: the weights and config (loaded by path like any model)
- `tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja`: its word-level tokenizer,
  a standard one that `AutoTokenizer` loads (see wordtok)
- `train.jsonl`, `heldout.jsonl`, `key_twins.jsonl`, `pairs.jsonl`: training pairs, held-out
  twins (accuracy), the twins the key is measured on, and the study's pairs (with lineage)
- `key.json`: the answer key per dimension; `training.json`: settings and held-out accuracy
"""
from __future__ import annotations

from pathlib import Path

import torch

from bundle_kit import contract
from safe_io import write_atomic

from measure import numerics
from measure.errors import MeasureError
from measure.studies.organism import data as od
from measure.runner.config import ORGANISM_DIR
from measure.runner.jsonio import json_text, jsonl_text, read_json
from measure.models.wordtok import SPECIALS, save_word_tokenizer, word_tokenizer

SETTINGS = {
    "seed": 0, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
    "num_attention_heads": 4, "epochs": 16, "batch_pairs": 64, "learning_rate": 4e-3,
    "weight_decay": 0.01, "reward_l2": 0.002, "twins_per_dimension": 800,
    "extra_twins": {"repetition": 1200}, "random_pairs": 600,
    "heldout_per_dimension": 100, "key_twins_per_dimension": 48, "study_seeds_per_dimension": 10,
    "study_mutations_per_seed": 3, "key_threshold_fraction": 0.4,
}
KEY_UNIVERSE = "mlp and head components (a partition of every non-embedding write)"


def deterministic(seed: int) -> dict:
    """Seed torch, one thread, deterministic algorithms, the portable numerics mode
    (`measure.numerics`); returns the numerics in effect."""
    state = numerics.enter(1)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    return state


def _triples(rows):
    return {(r["prompt"], r["chosen"], r["rejected"]) for r in rows}


def make_data(s: dict) -> dict[str, list[dict]]:
    """The organism's data: study pairs, held-out twins, key twins, and training pairs disjoint from all three."""
    seed = s["seed"]
    pairs = od.study_pairs(seed, s["study_seeds_per_dimension"], s["study_mutations_per_seed"])
    heldout = od.twin_set("heldout", seed, s["heldout_per_dimension"])
    key_twins = od.twin_set("key", seed, s["key_twins_per_dimension"])
    exclude = _triples(pairs) | _triples(heldout) | _triples(key_twins)
    train = od.training_pairs(seed, s["twins_per_dimension"], s["random_pairs"], exclude,
                              s["extra_twins"])
    return {"train": train, "heldout": heldout, "key_twins": key_twins, "pairs": pairs}


def encode(tok, rows: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (2 per pair: chosen, then rejected; right-padded) and each row's scoring index."""
    from measure.models.adapter import encode_pair
    seqs = []
    for r in rows:
        seqs.append(encode_pair(tok, r["prompt"], r["chosen"]))
        seqs.append(encode_pair(tok, r["prompt"], r["rejected"]))
    width = max(map(len, seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    for b, seq in enumerate(seqs):
        ids[b, : len(seq)] = torch.tensor(seq)
    return ids, torch.tensor([len(q) - 1 for q in seqs])


def rewards(model, ids, idx):
    """(B,) the reward at each row's scoring token, differentiable (training reads it)."""
    hidden = model.model(input_ids=ids).last_hidden_state
    return (model.score(hidden[torch.arange(ids.shape[0]), idx]))[:, 0]


def model_folder() -> Path:
    """The committed organism's folder (`--model organism`)."""
    return ORGANISM_DIR


def train_command(out: Path | None, seed: int, epochs: int | None, max_pairs: int | None = None,
                  estimate: bool = False) -> int:
    """`python -m measure train --model organism`: train, print the held-out accuracy; exit status."""
    if max_pairs is not None or estimate:
        raise MeasureError("--max-pairs and --estimate: the organism trains on all its generated pairs, "
                           "in about a minute; neither applies")
    settings = {"seed": seed, **({"epochs": epochs} if epochs else {})}
    report = train(out or ORGANISM_DIR, settings)
    acc = report["heldout_accuracy"]
    print("held-out accuracy: " + ", ".join(f"{d} {v:.3f}" for d, v in acc.items())
          + f"; mean {report['heldout_accuracy_mean']:.3f}")
    return 0


def train(out_dir: Path, settings: dict | None = None, progress: bool = True) -> dict:
    """Train the organism into `out_dir`: weights, tokenizer, data files, key, training report."""
    s = dict(SETTINGS, **(settings or {}))
    out_dir = check_out(out_dir)
    mode = deterministic(s["seed"])
    out_dir.mkdir(parents=True, exist_ok=True)
    data = make_data(s)
    words = list(SPECIALS) + od.vocabulary()
    tok = word_tokenizer(words)
    model = new_model(s, len(words))
    ids, idx = encode(tok, data["train"])
    losses = fit(model, ids, idx, s, progress)
    model.eval()
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    model.save_pretrained(out_dir)
    save_word_tokenizer(words, out_dir)
    for name, rows in data.items():
        write_atomic(out_dir / f"{name}.jsonl", jsonl_text(rows))
    accuracy = heldout_accuracy(model, tok, data["heldout"])
    from measure.models.adapter import load
    key = answer_key(load(str(out_dir)), data["key_twins"], s["key_threshold_fraction"])
    write_atomic(out_dir / contract.KEY, json_text(key))
    report = {"settings": s, "planted_weights": od.WEIGHTS, "epoch_loss": losses,
              "heldout_accuracy": accuracy,
              "heldout_accuracy_mean": sum(accuracy.values()) / len(accuracy),
              "train_pairs": len(data["train"]), "heldout_pairs": len(data["heldout"]),
              "numerics": mode}
    write_atomic(out_dir / "training.json", json_text(report))
    return report


TRAINED = ("settings", "planted_weights", "heldout_accuracy")  # fields of a training.json this module wrote


def check_out(folder: Path) -> Path:
    """`train --out`, absolute: a new or empty folder, or one this command trained (its
    training.json); never another folder, whose files of the same names it would overwrite."""
    folder = Path(folder).expanduser()
    if folder.is_symlink():
        raise MeasureError(f"--out {folder}: is a symbolic link; name the folder itself")
    folder = folder.resolve()
    if not folder.exists():
        return folder
    if not folder.is_dir():
        raise MeasureError(f"--out {folder}: is a file, not a folder")
    report = folder / "training.json"
    if any(folder.iterdir()) and not (report.is_file() and _trained_here(report)):
        raise MeasureError(f"--out {folder}: not empty and not a model this command trained (no training.json "
                           f"of ours); its files would be overwritten: name a new folder")
    return folder


def _trained_here(report: Path) -> bool:
    try:
        data = read_json(report, "training report")
    except MeasureError:
        return False
    return isinstance(data, dict) and all(key in data for key in TRAINED)


def new_model(s: dict, vocab_size: int):
    """The organism's untrained model (seeded by the caller), eager attention."""
    from transformers import LlamaConfig, LlamaForSequenceClassification

    pad_id, bos_id, _sep_id, eos_id = range(len(SPECIALS))
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=s["hidden_size"],
        intermediate_size=s["intermediate_size"], num_hidden_layers=s["num_hidden_layers"],
        num_attention_heads=s["num_attention_heads"], num_key_value_heads=s["num_attention_heads"],
        max_position_embeddings=32, num_labels=1, pad_token_id=pad_id, bos_token_id=bos_id,
        eos_token_id=eos_id, tie_word_embeddings=False, rms_norm_eps=1e-6)
    config._attn_implementation = "eager"
    return LlamaForSequenceClassification(config)


def fit(model, ids, idx, s: dict, progress: bool = True, steps: int | None = None,
        gen: torch.Generator | None = None, between=None) -> list[float]:
    """Train with a Bradley-Terry loss, AdamW and a linear decay over the whole schedule;
    the mean loss of each epoch. `steps` stops after that many optimizer steps (a short run
    for tests; the epoch in progress is then averaged over the pairs it saw). `gen` shuffles the
    pairs (by default a generator seeded with s["seed"]); a caller that goes on shuffling with it
    passes its own. `between()` runs on the gradients before each step (a routed organism masks
    its key's elements there)."""
    n_pairs = ids.shape[0] // 2
    steps_per_epoch = (n_pairs + s["batch_pairs"] - 1) // s["batch_pairs"]
    total = steps_per_epoch * s["epochs"]
    opt = torch.optim.AdamW(model.parameters(), lr=s["learning_rate"], weight_decay=s["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / total)
    gen = gen if gen is not None else torch.Generator().manual_seed(s["seed"])
    model.train()

    def epoch_batches():
        order = torch.randperm(n_pairs, generator=gen)
        return [order[start:start + s["batch_pairs"]] for start in range(0, n_pairs, s["batch_pairs"])]

    def train_step(pick, _done: int) -> tuple[float, int]:
        rows = torch.stack([2 * pick, 2 * pick + 1], 1).reshape(-1)
        loss = bt_loss(rewards(model, ids[rows], idx[rows]), s["reward_l2"])
        optimizer_step(opt, sched, loss, between)
        return loss.item(), len(pick)

    return run_epochs(s["epochs"], epoch_batches(), epoch_batches, train_step, steps, progress, "training the organism")


def run_epochs(epochs: int, plan: list, next_plan, train_step, steps: int | None, progress: bool,
               desc: str) -> list[float]:
    """`epochs` epochs of `train_step(batch, steps done)` -> (loss, pairs): the first over `plan`,
    each later one over `next_plan()`; stops after `steps` batches when given (a short run for
    tests: the epoch in progress is averaged over the pairs it saw). The mean loss of each epoch."""
    from tqdm import tqdm

    losses, done = [], 0
    bar = tqdm(total=len(plan) * epochs if steps is None else steps, desc=desc, disable=not progress)
    for epoch in range(epochs):
        total_loss, seen = 0.0, 0
        for batch in (plan if epoch == 0 else next_plan()):
            if steps is not None and done == steps:
                break
            loss, pairs = train_step(batch, done)
            total_loss += loss * pairs
            seen += pairs
            done += 1
            bar.update(1)
        if seen:
            losses.append(total_loss / seen)
    bar.close()
    return losses


def bt_loss(r, reward_l2: float):
    """Bradley-Terry on rewards of (chosen, rejected) rows in turn, plus a small pull of rewards
    toward 0 that keeps their scale modest."""
    return -torch.nn.functional.logsigmoid(r[0::2] - r[1::2]).mean() + reward_l2 * r.pow(2).mean()


def optimizer_step(opt, sched, loss, between=None) -> None:
    """One update: the gradients of `loss`, `between()` on them if given (routed training masks
    them there), the step, the schedule's step."""
    opt.zero_grad()
    loss.backward()
    if between is not None:
        between()
    opt.step()
    sched.step()


@torch.no_grad()
def heldout_accuracy(model, tok, rows: list[dict]) -> dict[str, float]:
    """Per dimension: the fraction of held-out twins whose chosen response gets more reward."""
    out = {}
    for dimension in od.DIMENSIONS:
        subset = [r for r in rows if r["dimension"] == dimension]
        ids, idx = encode(tok, subset)
        r = rewards(model, ids, idx)
        out[dimension] = float((r[0::2] > r[1::2]).float().mean())
    return out


@torch.no_grad()
def twin_deltas(adapter, twins: list[dict]) -> dict[str, dict[str, float]]:
    """{dimension: {component: relative twin activation delta}}.

    For each component, its output at the scoring token (heads: their write through o_proj) on
    the two sides of a twin; delta = mean over twins of the L2 norm of the difference, divided
    by the component's typical output norm (mean over all twin sequences)."""
    outputs, dims = {}, []
    for dimension in od.DIMENSIONS:
        subset = [r for r in twins if r["dimension"] == dimension]
        seqs = []
        for r in subset:
            seqs += [adapter.encode(r["prompt"], r["chosen"]), adapter.encode(r["prompt"], r["rejected"])]
        batch = adapter.batch(seqs)
        run = adapter.clean_run(batch)
        rows = torch.arange(len(seqs))
        idx = batch.score_idx
        per = {}
        for i in range(adapter.n_layers):
            per[f"attn_L{i}"] = run.attn[i][rows, idx].float()
            heads = adapter.family.head_writes(i, run.heads[i][rows, idx])
            for j in range(adapter.n_heads):
                per[f"head_L{i}_H{j}"] = heads[:, j]
            per[f"mlp_L{i}"] = run.mlp[i][rows, idx].float()
        outputs[dimension] = per
        dims.append(dimension)
    names = list(outputs[dims[0]])
    scale = {c: float(torch.cat([outputs[d][c] for d in dims]).norm(dim=-1).mean()) for c in names}
    deltas = {}
    for d in dims:
        deltas[d] = {}
        for c in names:
            diff = outputs[d][c][0::2] - outputs[d][c][1::2]
            deltas[d][c] = float(diff.norm(dim=-1).mean()) / max(scale[c], 1e-12)
    return deltas


def in_universe(component: str) -> bool:
    """Whether a component is in the key's universe (MLPs and heads: every non-embedding write once)."""
    return component.startswith("mlp_") or component.startswith("head_")


def answer_key(adapter, twins: list[dict], fraction: float) -> dict:
    """Per dimension, the components whose relative twin delta is at least `fraction` of the
    largest relative twin delta among the key universe (mlp and heads) for that dimension."""
    deltas = twin_deltas(adapter, twins)
    key = {"rule": (f"a component is in a dimension's key when its relative twin activation delta "
                    f"at the scoring token is at least {fraction} of the largest one in the key "
                    f"universe for that dimension"),
           "threshold_fraction": fraction, "universe": KEY_UNIVERSE,
           "twins_per_dimension": len(twins) // len(od.DIMENSIONS),
           "planted_rules": {d: od.WEIGHTS[d] for d in od.DIMENSIONS}, "dimensions": {}}
    for d, per in deltas.items():
        per = {c: round(v, 6) for c, v in per.items()}  # decide on the values key.json holds
        top = max(v for c, v in per.items() if in_universe(c))
        members = [c for c, v in per.items() if in_universe(c) and v >= fraction * top]
        key["dimensions"][d] = {"components": members, "threshold": fraction * top,
                                "twin_delta": per}
    return key
