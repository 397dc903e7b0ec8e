"""`python -m measure train --model realprefs --estimate`: the training's work and time, before it runs.

The work is counted from the real sequences (their token counts under the budget), with the FLOP
model of `measure plan` for one sequence of T tokens through one BERT layer, forward:

    T (8 d^2 + 4 d I) + 4 T^2 d          (q, k, v, output projections; the MLP; scores and weighted values)

A backward pass costs twice its forward pass, so a trained layer costs three forwards. The run:

- the cache pass: every training-side sequence (dev slice included) through the `n_lower` frozen layers, once;
- each epoch: every training sequence through the trained layers, forward and backward;
- the dev slice: its sequences through the trained layers, forward, once at the end.

Embeddings, LayerNorms, softmax, the heads and the optimizer are left out (under 2 % here).

The rate is measured on this machine, on the same code: the cache pass over `SAMPLE` sequences
and one training step of `SAMPLE // 2` pairs, timed in this process's CPU seconds (so other jobs
on a shared machine do not inflate it), best of two after a warm-up. With one thread that is the
wall time of a quiet machine; a loaded one takes longer.
"""
from __future__ import annotations

import time

SAMPLE = 32  # sequences timed in each phase


def layer_flops(T: int, d: int = 384, intermediate: int = 1536) -> float:
    """FLOPs of one sequence of T tokens through one BERT layer, forward."""
    return T * (8.0 * d * d + 4.0 * d * intermediate) + 4.0 * T * T * d


def work(train_lengths: list[int], dev_lengths: list[int], n_lower: int, n_top: int, epochs: int) -> dict:
    """FLOPs of each phase of a run over sequences of these lengths."""
    f = sum(map(layer_flops, train_lengths))
    g = sum(map(layer_flops, dev_lengths))
    return {"cache": n_lower * (f + g), "train": epochs * 3 * n_top * f, "dev": n_top * g}


def _best(fn, repeats: int = 2) -> float:
    fn()  # warm-up, not counted
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def measure_rates(bert, seqs: list[list[int]], n_lower: int, seed: int = 0) -> dict:
    """FLOP/s of the cache pass and of a training step, on the first SAMPLE sequences."""
    import torch

    from measure.studies.realprefs.lower import lower_states
    from measure.studies.realprefs.top import TopModel

    sample = seqs[:SAMPLE]
    seconds_cache = _best(lambda: [lower_states(bert, ids, n_lower) for ids in sample])
    states = [lower_states(bert, ids, n_lower) for ids in sample]
    top = TopModel(bert, n_lower, 3, seed)
    n_top = len(top.layers)

    def step():
        top.zero_grad(set_to_none=True)
        for i in range(0, len(states) - 1, 2):
            margin = top(states[i])[0] - top(states[i + 1])[0]
            (-torch.nn.functional.logsigmoid(margin)).backward()

    seconds_step = _best(step)
    flops = sum(layer_flops(len(ids)) for ids in sample)
    return {"cache": n_lower * flops / seconds_cache, "train": 3 * n_top * flops / seconds_step,
            "dev": 3 * n_top * flops / seconds_step,  # forward only, at the training rate
            "sample": len(sample), "seconds_cache": seconds_cache, "seconds_step": seconds_step}


def estimate(settings: dict) -> dict:
    """The work, measured rates and projected seconds of a run with `settings`."""
    from measure.runner.study import setup_determinism
    from measure.studies.minilm.model import load_trunk
    from measure.studies.realprefs import slices
    from measure.studies.realprefs.train import Schedule

    state = setup_determinism(settings["seed"], 1, "cpu")
    bert, tokenizer = load_trunk()
    train, dev = slices.training_slices(tokenizer, settings["max_pairs"], settings["max_tokens"])
    n_top = settings["trained_layers"]
    n_lower = 6 - n_top
    w = work([len(s) for s in train.seqs], [len(s) for s in dev.seqs], n_lower, n_top, settings["epochs"])
    rates = measure_rates(bert, train.seqs, n_lower, settings["seed"])
    seconds = {k: w[k] / rates[k] for k in w}
    schedule = Schedule(len(train.pairs), settings["batch_pairs"], settings["epochs"], settings["warmup"])
    return {"numerics": state, "train_pairs": train.counts(), "dev_pairs": dev.counts(),
            "sequences": len(train.seqs) + len(dev.seqs),
            "mean_tokens": sum(map(len, train.seqs + dev.seqs)) / max(1, len(train.seqs + dev.seqs)),
            "steps": schedule.total, "flops": w, "rates": rates, "seconds": seconds,
            "seconds_per_step": seconds["train"] / max(1, schedule.total),
            "total_seconds": sum(seconds.values())}


def estimate_command(settings: dict) -> int:
    """Print the estimate; exit status 0."""
    e = estimate(settings)
    n = ", ".join(f"{k} {v}" for k, v in e["train_pairs"].items())
    print(f"training pairs: {n}; dev pairs: {', '.join(f'{k} {v}' for k, v in e['dev_pairs'].items())}")
    print(f"{e['sequences']} sequences, {e['mean_tokens']:.1f} tokens each on average; {e['steps']} steps "
          f"of {settings['batch_pairs']} pairs, {settings['epochs']} epoch(s), top {settings['trained_layers']} layers trained")
    for phase, label in (("cache", "frozen layers, once"), ("train", "training"), ("dev", "dev slice")):
        print(f"  {label:20} {e['flops'][phase] / 1e12:8.2f} TFLOP at {e['rates'][phase] / 1e9:6.1f} GFLOP/s "
              f"-> {e['seconds'][phase]:8.0f} s")
    print(f"  per step {e['seconds_per_step']:.2f} s; total {e['total_seconds']:.0f} s "
          f"({e['total_seconds'] / 60:.1f} min) of one core's CPU time, quiet machine; "
          f"rates measured on {e['rates']['sample']} sequences in this process's CPU seconds")
    return 0
