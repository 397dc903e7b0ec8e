"""The Bradley-Terry fine-tuning loop of the realprefs reward model, resumable to the same bytes.

A step takes the next `batch_pairs` pairs of the epoch's order (a permutation drawn from one
generator seeded `seed`, one per epoch, so every epoch's order is known from the seed alone); a
batch mixes objectives. Each pair is read along its own objective's head only:

    loss = mean over the batch of  -log sigmoid( r_k(chosen) - r_k(rejected) ),  k = the pair's objective

Each sequence runs alone from its cached lower-layer states (`lower.py`, `top.py`: no padding),
and the gradients of a batch are summed pair by pair in batch order before one AdamW step. The
learning rate warms up linearly over the first `warmup` share of the steps, then falls linearly
to zero at the last step; it is set from the step number, so there is no scheduler state.

Every `checkpoint_every` steps, and at the last, the trained tensors, AdamW's state and the step
losses so far are saved (`checkpoint.pt`, written atomically: a temporary file, then a rename).
A run started again with the same fingerprint loads it and continues from the next step; with one
thread in the portable numerics mode, what it writes is byte-identical to an uninterrupted run
(`tests/measure/test_realprefs_train.py`).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from measure.errors import MeasureError

CHECKPOINT = "checkpoint.pt"


@dataclass(frozen=True)
class Schedule:
    """Steps and learning-rate factor of a run over `pairs` pairs."""
    pairs: int
    batch_pairs: int
    epochs: int
    warmup: float

    @property
    def steps_per_epoch(self) -> int:
        """Optimizer steps in one pass over the pairs (the last batch may be short)."""
        return math.ceil(self.pairs / self.batch_pairs)

    @property
    def total(self) -> int:
        """Optimizer steps of the whole run."""
        return self.steps_per_epoch * self.epochs

    def factor(self, step: int) -> float:
        """The learning rate of `step` (from 0) as a share of the peak: linear warm-up, linear decay to 0."""
        warm = max(1, math.ceil(self.warmup * self.total))
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (self.total - step) / max(1, self.total - warm))


def orders(n: int, epochs: int, seed: int) -> list[torch.Tensor]:
    """Each epoch's order of the n pairs: permutations drawn in turn from a generator seeded `seed`."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randperm(n, generator=g) for _ in range(epochs)]


def save_checkpoint(folder: Path, step: int, top, optimizer, losses: list[float]) -> None:
    """Write the state after `step` steps to `folder/checkpoint.pt`, atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CHECKPOINT
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({"step": step, "top": top.state_dict(), "optimizer": optimizer.state_dict(),
                "losses": torch.tensor(losses, dtype=torch.float64)}, tmp)
    os.replace(tmp, path)


def load_checkpoint(folder: Path, top, optimizer) -> tuple[int, list[float]]:
    """Restore a saved state into `top` and `optimizer`; (steps done, step losses). (0, []) when
    there is none."""
    path = folder / CHECKPOINT
    if not path.exists():
        return 0, []
    try:
        state = torch.load(path, weights_only=True)
        top.load_state_dict(state["top"])
        optimizer.load_state_dict(state["optimizer"])
    except Exception as exc:  # a file this code did not write, or a torn one
        raise MeasureError(f"{path}: not a checkpoint of this run ({type(exc).__name__}); delete it "
                           f"to train from the start") from None
    return int(state["step"]), state["losses"].tolist()


def fit(top, states: list[torch.Tensor], objective: list[int], settings: dict, run_dir: Path,
        progress: bool = True, checkpoint_every: int = 10) -> list[float]:
    """Train `top` on the pairs whose chosen and rejected cached states are `states[2i]` and
    `states[2i + 1]`, pair i read along head `objective[i]`; the loss of every step. Resumes from
    `run_dir`'s checkpoint, and saves one every `checkpoint_every` steps and at the end."""
    from tqdm import tqdm

    n = len(objective)
    plan = Schedule(n, settings["batch_pairs"], settings["epochs"], settings["warmup"])
    optimizer = torch.optim.AdamW(top.parameter_groups(settings["lr_layers"], settings["lr_heads"],
                                                       settings["weight_decay"]), foreach=False)
    peaks = [group["lr"] for group in optimizer.param_groups]
    done, losses = load_checkpoint(run_dir, top, optimizer)
    epoch_orders = orders(n, settings["epochs"], settings["seed"])
    bar = tqdm(total=plan.total, initial=done, desc="training the top layers", unit="step",
               disable=not progress)
    for step in range(done, plan.total):
        epoch, b = divmod(step, plan.steps_per_epoch)
        batch = epoch_orders[epoch][b * plan.batch_pairs:(b + 1) * plan.batch_pairs].tolist()
        for group, peak in zip(optimizer.param_groups, peaks):
            group["lr"] = peak * plan.factor(step)
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for i in batch:
            k = objective[i]
            margin = top(states[2 * i])[k] - top(states[2 * i + 1])[k]
            loss = -torch.nn.functional.logsigmoid(margin) / len(batch)
            loss.backward()
            total += loss.item()
        optimizer.step()
        losses.append(total)
        if (step + 1) % checkpoint_every == 0 or step + 1 == plan.total:
            save_checkpoint(run_dir, step + 1, top, optimizer, losses)
        bar.update(1)
        bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.4f}", epoch=epoch + 1)
    bar.close()
    return losses


@torch.no_grad()
def margins(top, states: list[torch.Tensor], objective: list[int], progress: bool = False) -> list[float]:
    """Each pair's margin r_k(chosen) - r_k(rejected) along its own objective's head."""
    from tqdm import tqdm
    out = []
    for i in tqdm(range(len(objective)), desc="dev margins", unit="pair", disable=not progress):
        k = objective[i]
        out.append(float(top(states[2 * i])[k] - top(states[2 * i + 1])[k]))
    return out
