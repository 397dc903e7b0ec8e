"""The realprefs trainer's two speed choices, side by side, on real training-side sequences.

    .venv/bin/python benchmarks/benchmark_realprefs_train.py [--sequences 64] [--repeats 3]

In the portable numerics mode, one thread, on the first `--sequences` training sequences (load
order, 128-token budget):

- the cache pass through the frozen layers 0-3: each sequence alone (no padding: what
  `measure/studies/realprefs/lower.py` does) against padded batches of 32 with an attention mask;
- a training step through the top two layers, forward and backward: each pair's sequences alone,
  gradients summed (what `measure/studies/realprefs/train.py` does) against one padded batch.

Prints each side's best CPU time (this process's CPU seconds, so other jobs do not inflate it;
the machine is shared, so compare the ratios), the ratio, and the padding share of the batched
side's tokens. Training-side pairs only: the evaluation side is never read.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from measure import numerics  # noqa: E402

numerics.set_environment()


def best(fn, repeats: int) -> float:
    """The least CPU time of `repeats` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def mask_of(lengths: list[int]):
    """The (B, 1, 1, width) additive attention mask of right-padded rows of these lengths."""
    import torch
    mask = torch.zeros(len(lengths), 1, 1, max(lengths))
    for b, n in enumerate(lengths):
        mask[b, ..., n:] = torch.finfo(torch.float32).min
    return mask


def padded(states: list):
    """(B, width, d) right-padded states and their mask."""
    import torch
    lengths = [s.shape[0] for s in states]
    x = torch.zeros(len(states), max(lengths), states[0].shape[-1])
    for b, s in enumerate(states):
        x[b, :s.shape[0]] = s
    return x, mask_of(lengths)


def main() -> int:
    """Time both sides of both choices and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from measure.studies.minilm.model import load_trunk
    from measure.studies.realprefs import slices
    from measure.studies.realprefs.lower import lower_states
    from measure.studies.realprefs.top import TopModel

    numerics.enter(1)
    bert, tokenizer = load_trunk()
    train, _dev = slices.training_slices(tokenizer, max_pairs=args.sequences)
    seqs = train.seqs[:args.sequences - args.sequences % 2]
    lengths = [len(s) for s in seqs]
    layers = bert.encoder.layer

    def alone():
        for ids in seqs:
            lower_states(bert, ids, 4)

    def batched():
        with torch.no_grad():
            for s in range(0, len(seqs), 32):
                group = seqs[s:s + 32]
                width = max(map(len, group))
                ids = torch.zeros(len(group), width, dtype=torch.long)
                for b, q in enumerate(group):
                    ids[b, :len(q)] = torch.tensor(q)
                hidden = bert.embeddings(input_ids=ids)
                mask = mask_of([len(q) for q in group])
                for layer in layers[:4]:
                    hidden = layer(hidden, attention_mask=mask)

    states = [lower_states(bert, ids, 4) for ids in seqs]
    top = TopModel(bert, 4, 3, seed=0)

    def step_alone():
        top.zero_grad(set_to_none=True)
        for i in range(0, len(states), 2):
            margin = top(states[i])[0] - top(states[i + 1])[0]
            (-torch.nn.functional.logsigmoid(margin)).backward()

    def step_batched():
        top.zero_grad(set_to_none=True)
        x, mask = padded(states)
        hidden = x
        for layer in top.layers:
            hidden = layer(hidden, attention_mask=mask)
        real = (mask[:, 0, 0, :] == 0).float().unsqueeze(-1)
        rewards = top.heads((hidden * real).sum(1) / real.sum(1))[:, 0]
        (-torch.nn.functional.logsigmoid(rewards[0::2] - rewards[1::2])).sum().backward()

    widths = [max(lengths[s:s + 32]) for s in range(0, len(lengths), 32)]
    padding = 1 - sum(lengths) / sum(w * len(lengths[s:s + 32]) for w, s in zip(widths, range(0, len(lengths), 32)))
    print(f"{len(seqs)} training sequences, {sum(lengths) / len(lengths):.1f} tokens on average; "
          f"load average {os.getloadavg()[0]:.1f}")
    for label, a, b in (("cache pass, layers 0-3", alone, batched),
                        ("training step, layers 4-5", step_alone, step_batched)):
        ta, tb = best(a, args.repeats), best(b, args.repeats)
        print(f"  {label:26} alone {ta:6.2f} s   padded batch {tb:6.2f} s   alone/batch {ta / tb:.2f}")
    print(f"  padding share of the batched tokens: {padding:.1%} (cache pass: batches of 32; step: one batch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
