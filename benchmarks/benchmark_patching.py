"""Time the project's patch sweeps against the two ways people usually patch, on the same models,
in both numerics modes side by side.

Default: random-weight Llama reward models (built from a config with a fixed seed; nothing is
downloaded) of 8 layers at hidden size 256 with 30 pairs, and 16 layers with 24 pairs; mean
ablation of every attn and mlp block, patched in at every position; one thread. Four methods:

- the ladder (`measure.instruments.patching.patch_ladder`, opt-in, not used by the committed
  studies): one pass up the layers for every patch point, the sequences packed end to end (no
  padding: every projection and MLP of a layer is one matrix product over all variants' and
  sequences' tokens), attention scored per group of similar lengths (`--buckets` per shard),
  the last layer at the scoring token only, and its own clean run made the same packed way;
- the sweep (`measure.instruments.patching.patch_sweep`, what the committed studies use): caches
  the clean run, resumes each patched run at the patched layer, batches all variants that
  resume from the same point;
- a plain forward-hooks loop: one full forward pass of the model per component per sequence
  (batch of one, no padding), a forward hook replacing the block's output;
- nnsight 0.8.1 (if installed), the same loop as traces that set the block's output.

Both sweeps work in shards of 8 pairs. Every method also runs the clean model once per sequence
(the sweeps: once per shard) for the clean margin. Prints wall and CPU seconds, their ratios,
layer evaluations and token-layer work (one token through one layer) of each, and the largest
disagreement of the patched margins between any two methods (must be <= 1e-5); and this CPU's
one-thread matrix-product peak (a 2048x1024 by 1024x1024 float32 product, the best of several
taken before and after the methods) beside the rate the ladder reaches (its FLOPs, counted by
torch's FlopCounterMode in an untimed run, over its CPU time).

Each numerics mode runs in its own child process, since torch reads the mode's variables once,
when it first computes (measure/numerics.py), and the two are printed side by side at the end:

- `native`: the kernels torch picks for this CPU (its best ATen capability, MKL's own code path,
  oneDNN on), one thread: what a study could run at without the portable claim;
- `portable`: the mode every committed study runs in (ATen's portable kernels, MKL CNR
  `COMPATIBLE`, oneDNN off, one thread), whose bundles are byte-identical on any x86-64 CPU.

Timings on a shared machine are inflated and noisy; compare ratios, and CPU time over wall, and
give `--repeat 3` (every method runs three times, interleaved, and its fastest round is kept).

    .venv/bin/python benchmarks/benchmark_patching.py [--sizes small,large] [--modes native,portable]
        [--no-nnsight] [--buckets 4] [--repeat 3]
    .venv/bin/python benchmarks/benchmark_patching.py --organism   # the older check below

`--organism`: the organism model, every attn/mlp block and every head in modes mean, zero and
swap, the sweep against `instruments.naive_sweep` (one forward pass per pair, component and mode),
in the portable mode.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from measure import numerics  # noqa: E402  (imports no torch)

SIZES = {"small": (8, 30), "large": (16, 24)}  # layers, pairs; hidden 256 for both
HIDDEN, HEADS, KV_HEADS, MLP, VOCAB, SHORTEST, LONGEST, SHARD = 256, 8, 4, 688, 512, 16, 48, 8
TOLERANCE = 1e-5
MODES_RUN = ("native", "portable")
TARGET = 6.0  # the ladder against each peer, native mode (issue 29)

import torch  # noqa: E402

from measure.models.adapter import Adapter, load, parse_component  # noqa: E402
from measure.instruments.patching import MODES, StatsAccumulator, naive_sweep, patch_ladder, patch_sweep  # noqa: E402
from measure.runner.jsonio import read_jsonl  # noqa: E402
from measure.runner.study import ORGANISM_DIR, setup_determinism  # noqa: E402


def random_reward_model(layers: int) -> Adapter:
    from transformers import AutoModelForSequenceClassification, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=MLP,
                         num_hidden_layers=layers, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                         max_position_embeddings=64, num_labels=1, pad_token_id=0)
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    return Adapter(model, None, f"random-llama-{layers}L-h{HIDDEN}")


def random_pairs(n_pairs: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(1)
    seqs = []
    for _ in range(2 * n_pairs):
        n = int(torch.randint(SHORTEST, LONGEST + 1, (1,), generator=gen))
        seqs.append(torch.randint(1, VOCAB, (n,), generator=gen).tolist())
    return seqs  # 2p chosen, 2p+1 rejected


def _reward(adapter: Adapter, hidden: torch.Tensor) -> float:
    return float(hidden[0, -1].float() @ adapter.w_r.float() + adapter.score_bias)


def _value(stats, name, width, dtype):
    return stats.mean[name].to(dtype).expand(1, width, -1).clone()


def run_sweep(adapter, seqs, stats, components, counter, sweep=patch_sweep, own_clean=False):
    """The sweep shard by shard; `own_clean`: the sweep makes (and counts) its clean run itself."""
    out = {}
    for s in range(0, len(seqs) // 2, SHARD):
        rows = seqs[2 * s: 2 * (s + SHARD)]
        batch = adapter.batch(rows)
        width = batch.ids.shape[1]
        run = None
        if not own_clean:
            with torch.no_grad():
                run = adapter.clean_run(batch)
            counter["layer_evals"] += len(rows) * adapter.n_layers
            counter["token_layers"] += len(rows) * adapter.n_layers * width
        before, tokens = counter["layer_evals"], counter["token_layers"]
        result = sweep(adapter, batch, run, stats, components, ("mean",), counter=counter)
        if counter["token_layers"] == tokens:  # a sweep that does not count its own (padded) tokens
            counter["token_layers"] += (counter["layer_evals"] - before) * width
        for name in components:
            for p, margin in enumerate(result[(name, "mean")][0].tolist()):
                out[(s + p, name)] = margin
    return out


def run_hooks(adapter, seqs, stats, components, counter):
    out = {}
    for p in range(len(seqs) // 2):
        rewards = {}
        for side in (0, 1):
            ids = torch.tensor([seqs[2 * p + side]])
            width = ids.shape[1]
            for name in components:
                kind, i, _ = parse_component(name)
                points = adapter.family.hook_points(i)
                module = points.attn if kind == "attn" else points.mlp
                value = _value(stats, name, width, adapter.dtype)

                def hook(module, args, output, value=value):
                    return (value,) + tuple(output[1:]) if isinstance(output, tuple) else value
                handle = module.register_forward_hook(hook)
                try:
                    with torch.no_grad():
                        hidden = adapter.base(input_ids=ids).last_hidden_state
                finally:
                    handle.remove()
                rewards[(side, name)] = _reward(adapter, hidden)
            with torch.no_grad():  # the clean run, for the clean margin
                adapter.base(input_ids=ids)
            counter["layer_evals"] += (len(components) + 1) * adapter.n_layers
            counter["token_layers"] += (len(components) + 1) * adapter.n_layers * width
        for name in components:
            out[(p, name)] = rewards[(0, name)] - rewards[(1, name)]
    return out


def run_nnsight(adapter, seqs, stats, components, counter):
    from nnsight import NNsight

    traced = NNsight(adapter.base)
    names = {module: name for name, module in adapter.base.named_modules()}

    def envoy(module):
        node = traced
        for part in names[module].split("."):
            node = node[int(part)] if part.isdigit() else getattr(node, part)
        return node

    out = {}
    for p in range(len(seqs) // 2):
        rewards = {}
        for side in (0, 1):
            ids = torch.tensor([seqs[2 * p + side]])
            width = ids.shape[1]
            for name in components:
                kind, i, _ = parse_component(name)
                points = adapter.family.hook_points(i)
                block = envoy(points.attn if kind == "attn" else points.mlp)
                value = _value(stats, name, width, adapter.dtype)
                with torch.no_grad():
                    with traced.trace(ids):
                        output = block.output
                        block.output = (value,) + tuple(output[1:]) if isinstance(output, tuple) else value
                        hidden = traced.output[0].save()
                rewards[(side, name)] = _reward(adapter, hidden)
            with torch.no_grad():
                adapter.base(input_ids=ids)
            counter["layer_evals"] += (len(components) + 1) * adapter.n_layers
            counter["token_layers"] += (len(components) + 1) * adapter.n_layers * width
        for name in components:
            out[(p, name)] = rewards[(0, name)] - rewards[(1, name)]
    return out


def timed(fn, *args):
    counter = {"layer_evals": 0.0, "token_layers": 0.0}
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, counter)
    return out, time.perf_counter() - wall, time.process_time() - cpu, counter


def matmul_peak(repeats: int = 5) -> float:
    """FLOP/s of this CPU's float32 matrix product (2048x1024 by 1024x1024) on the threads set
    now, the best of `repeats` timings (CPU time), after a warm-up."""
    a, b = torch.randn(2048, 1024), torch.randn(1024, 1024)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        for _ in range(4):
            a @ b
        best = min(best, time.process_time() - t)
    return 4 * 2 * 2048 * 1024 * 1024 / best


def counted_flops(fn, *args) -> float:
    """The FLOPs torch's FlopCounterMode counts in one untimed run of `fn` (matrix products and
    attention; elementwise work is not counted)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as flops:
        fn(*args, {"layer_evals": 0.0, "token_layers": 0.0})
    return float(flops.get_total_flops())


def compare(size: str, use_nnsight: bool, sweeps: dict, use_hooks: bool = True, repeat: int = 1) -> dict:
    """Time every method on one model size (`repeat` rounds, the methods interleaved in each,
    the fastest round of each kept); print the table; return the figures."""
    layers, n_pairs = SIZES[size]
    adapter = random_reward_model(layers)
    seqs = random_pairs(n_pairs)
    components = [c for c in adapter.components(heads=False) if c != "embed"]
    acc = StatsAccumulator()  # the mean values every method patches in
    with torch.no_grad():
        for s in range(0, n_pairs, SHARD):
            batch = adapter.batch(seqs[2 * s: 2 * (s + SHARD)])
            acc.add(adapter, batch, adapter.clean_run(batch))
    stats = acc.finish()
    methods = {label: (lambda a, q, st, c, k, fn=fn, own=own: run_sweep(a, q, st, c, k, fn, own))
               for label, (fn, own) in sweeps.items()}
    if use_hooks:
        methods["hooks loop"] = run_hooks
    if use_nnsight:
        methods["nnsight"] = run_nnsight
    for fn in methods.values():  # warm every path on one pair so none pays first-call costs
        fn(adapter, seqs[:2], stats, components[:2], {"layer_evals": 0.0, "token_layers": 0.0})
    base = next(iter(methods))
    flops = counted_flops(methods[base], adapter, seqs, stats, components)
    peaks = [matmul_peak()]
    results = {}
    for _ in range(repeat):  # interleaved, so a burst of load on a shared machine hits every method
        for label, fn in methods.items():
            out, wall, cpu, counter = timed(fn, adapter, seqs, stats, components)
            best = results.get(label, (None, float("inf"), float("inf"), None))
            results[label] = (out, min(wall, best[1]), min(cpu, best[2]), counter)
    peaks.append(matmul_peak())
    outs = [r[0] for r in results.values()]
    worst = max(abs(a[k] - b[k]) for a in outs for b in outs for k in a)
    print(f"\n{size}: {adapter.model_id}, {HEADS} heads ({KV_HEADS} KV), MLP {MLP}; {n_pairs} pairs, "
          f"lengths {SHORTEST}-{LONGEST}; mean ablation of {len(components)} attn/mlp blocks")
    labels = list(results)
    print(f"{'':22}" + "".join(f"{label:>16}" for label in labels))
    for row, idx, fmt in (("wall s", 1, ".2f"), ("CPU s", 2, ".2f")):
        print(f"{row:22}" + "".join(f"{results[label][idx]:>16{fmt}}" for label in labels))
    for key in ("layer_evals", "token_layers"):
        print(f"{key.replace('_', ' '):22}" + "".join(f"{results[label][3][key]:>16,.0f}" for label in labels))
    ratios = {}
    for label in labels[1:]:
        ratios[label] = {"wall": results[label][1] / results[base][1], "cpu": results[label][2] / results[base][2]}
        print(f"{label} / {base}: {ratios[label]['wall']:.2f}x wall, {ratios[label]['cpu']:.2f}x CPU")
    peak, rate = max(peaks), flops / results[base][2]
    print(f"{base}: {flops / 1e9:.1f} GFLOP in {results[base][2]:.2f} s CPU = {rate / 1e9:.1f} GFLOP/s, "
          f"{rate / peak:.0%} of this CPU's one-thread matmul peak ({peak / 1e9:.1f} GFLOP/s)")
    print(f"largest disagreement between any two methods: {worst:.2e} (must be <= {TOLERANCE:g})")
    return {"base": base, "worst": worst, "ratios": ratios, "flops": flops, "peak": peak,
            "seconds": {label: {"wall": r[1], "cpu": r[2]} for label, r in results.items()}}


def organism_check(args) -> int:
    setup_determinism(0, args.threads, "cpu")
    adapter = load(args.model)
    rows = read_jsonl(args.pairs_file)
    step = max(1, len(rows) // args.pairs)
    pairs = rows[::step][: args.pairs]
    seqs = [[adapter.encode(p["prompt"], p["chosen"]), adapter.encode(p["prompt"], p["rejected"])]
            for p in pairs]
    shards = [range(s, min(s + args.shard_size, len(pairs))) for s in range(0, len(pairs), args.shard_size)]
    batches = [adapter.batch([t for i in shard for t in seqs[i]]) for shard in shards]
    components = [c for c in adapter.components() if c != "embed"]

    acc = StatsAccumulator()  # the mean-mode values both methods patch in
    with torch.no_grad():
        for batch in batches:
            acc.add(adapter, batch, adapter.clean_run(batch))
    stats = acc.finish()

    def sweep():
        counter, out = {}, []
        for batch in batches:
            with torch.no_grad():
                run = adapter.clean_run(batch)
            counter["layer_evals"] = counter.get("layer_evals", 0) + batch.ids.shape[0] * adapter.n_layers
            out.append(patch_sweep(adapter, batch, run, stats, components, MODES, counter=counter))
        return counter, out

    def naive():
        counter, out = {}, []
        for batch in batches:
            out.append(naive_sweep(adapter, batch, stats, components, MODES, counter=counter))
        return counter, out

    sweep()  # warm both paths once so neither pays first-call costs in the timing
    t0 = time.perf_counter()
    naive_count, naive_out = naive()
    naive_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sweep_count, sweep_out = sweep()
    sweep_s = time.perf_counter() - t0

    worst = 0.0
    for slow, fast in zip(naive_out, sweep_out):
        for key, value in slow.items():
            worst = max(worst, float((fast[key][0] - value).abs().max()))
    variants = len(components) * len(MODES) * len(pairs)
    print(f"model {adapter.model_id}: {adapter.n_layers} layers, {adapter.n_heads} heads; "
          f"{len(pairs)} pairs x {len(components)} components x {len(MODES)} modes = {variants} patched pairs")
    print(f"{'':24}{'naive loop':>14}{'sweep':>14}{'ratio':>10}")
    print(f"{'layer evaluations':24}{naive_count['layer_evals']:>14,.0f}{sweep_count['layer_evals']:>14,.0f}"
          f"{naive_count['layer_evals'] / sweep_count['layer_evals']:>9.2f}x")
    print(f"{'wall time (s)':24}{naive_s:>14.3f}{sweep_s:>14.3f}{naive_s / sweep_s:>9.2f}x")
    print(f"largest disagreement: {worst:.2e} (must be <= 1e-5)")
    return 0 if worst <= 1e-5 else 1


def enter_mode(mode: str, threads: int) -> dict:
    """Put this (child) process in `mode` and return the numerics in effect. The parent started
    it with the portable variables set (portable) or removed (native), before torch was imported."""
    if mode == "portable":
        setup_determinism(0, threads, "cpu")  # refuses a process whose torch chose other kernels
    else:
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        torch.use_deterministic_algorithms(True)
    return numerics.in_effect()


def child(args, mode: str) -> int:
    """Run every size in `mode`, print the tables, write the figures to `args.json`."""
    state = enter_mode(mode, args.threads)
    use_nnsight = not args.no_nnsight
    if use_nnsight:
        try:
            import nnsight  # noqa: F401
        except ImportError:
            print("nnsight is not installed (pip install -e '.[bench]'); running without it")
            use_nnsight = False
    print(f"== {mode} mode: ATen capability {state['aten_cpu_capability']}, MKL CNR {state['mkl_cnr']}, "
          f"oneDNN {'on' if state['onednn'] else 'off'}, {state['threads']} thread(s); torch {torch.__version__}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    figures = {"mode": mode, "numerics": state, "sizes": {}}
    for size in args.sizes.split(","):
        sweeps = {f"ladder/{b}": (functools.partial(patch_ladder, buckets=b), True)
                  for b in map(int, args.buckets.split(","))}
        sweeps["sweep"] = (patch_sweep, False)
        figures["sizes"][size] = compare(size, use_nnsight, sweeps, not args.no_hooks, args.repeat)
        sys.stdout.flush()
    Path(args.json).write_text(json.dumps(figures))
    return 0


def child_environment(mode: str) -> dict:
    """The environment a child starts in: the portable mode's variables set, or removed."""
    env = {k: v for k, v in os.environ.items() if k not in numerics.ENVIRONMENT}
    if mode == "portable":
        numerics.set_environment(env)
    return env


def side_by_side(figures: list[dict]) -> bool:
    """Print the modes' figures side by side; True if the ladder reaches TARGET against every
    peer in native mode (CPU time)."""
    print(f"\n== side by side (CPU-time ratios; wall in brackets): the ladder against each method")
    met = True
    for size in figures[0]["sizes"]:
        print(f"\n{size}:")
        head = figures[0]["sizes"][size]
        labels = list(head["ratios"])
        print(f"{'mode':10}{head['base'] + ' CPU s':>16}" + "".join(f"{label:>18}" for label in labels)
              + f"{'GFLOP/s':>10}{'peak':>8}{'of peak':>9}")
        for fig in figures:
            got = fig["sizes"][size]
            base = got["seconds"][got["base"]]["cpu"]
            cells = "".join(f"{got['ratios'][label]['cpu']:>8.2f}x ({got['ratios'][label]['wall']:>5.2f}x)"
                            for label in labels)
            rate = got["flops"] / base
            print(f"{fig['mode']:10}{base:>16.2f}{cells}{rate / 1e9:>10.1f}{got['peak'] / 1e9:>8.1f}"
                  f"{rate / got['peak']:>9.0%}")
            if fig["mode"] == "native":
                met &= all(got["ratios"][peer]["cpu"] >= TARGET for peer in ("hooks loop", "nnsight")
                           if peer in got["ratios"])
    native = [f for f in figures if f["mode"] == "native"]
    if native:
        print(f"\nnative mode: the ladder {'reaches' if met else 'does NOT reach'} {TARGET:g}x against "
              f"both peers in CPU time at every size")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="small,large", help="comma-separated: small (8 layers), large (16)")
    parser.add_argument("--modes", default=",".join(MODES_RUN), help="comma-separated: native, portable")
    parser.add_argument("--no-nnsight", action="store_true", help="leave nnsight out even if installed")
    parser.add_argument("--no-hooks", action="store_true", help="leave the hooks loop out")
    parser.add_argument("--buckets", default="4", help="length groups per shard for the ladder's attention "
                        "(comma-separated to compare)")
    parser.add_argument("--organism", action="store_true", help="the older organism check (all modes and heads)")
    parser.add_argument("--model", default="organism", help="with --organism")
    parser.add_argument("--pairs-file", type=Path, default=ORGANISM_DIR / "pairs.jsonl", help="with --organism")
    parser.add_argument("--pairs", type=int, default=24, help="with --organism: pairs to patch")
    parser.add_argument("--shard-size", type=int, default=8, help="with --organism")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every method, interleaved; the "
                        "fastest of each is kept (3 on a shared machine)")
    parser.add_argument("--child", choices=MODES_RUN, help=argparse.SUPPRESS)  # one mode, in this process
    parser.add_argument("--json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.organism:
        return organism_check(args)
    for size in args.sizes.split(","):
        if size not in SIZES:
            print(f"error: --sizes: unknown size {size!r}; use {', '.join(SIZES)}", file=sys.stderr)
            return 2
    modes = args.modes.split(",")
    if any(m not in MODES_RUN for m in modes):
        print(f"error: --modes: use {', '.join(MODES_RUN)}", file=sys.stderr)
        return 2
    if args.child:
        return child(args, args.child)
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:  # one child per mode: torch reads the mode's variables once
            out = Path(tmp) / f"{mode}.json"
            argv = ["--sizes", args.sizes, "--buckets", args.buckets, "--threads", str(args.threads),
                    "--repeat", str(args.repeat)]
            argv += ["--no-nnsight"] * args.no_nnsight + ["--no-hooks"] * args.no_hooks
            done = subprocess.run([sys.executable, __file__, *argv, "--child", mode, "--json", str(out)],
                                  env=child_environment(mode))
            if done.returncode != 0:
                return done.returncode
            figures.append(json.loads(out.read_text()))
    side_by_side(figures)
    worst = max(fig["sizes"][size]["worst"] for fig in figures for size in fig["sizes"])
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
