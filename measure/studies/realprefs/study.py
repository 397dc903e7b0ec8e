"""The realprefs study (issue 30 item 4): where each preference lives in the realprefs reward model,
and whether the score moves when you patch there; written to `bundles/realprefs/`
(`python -m measure run --model realprefs --study realprefs`).

**Pairs.** The evaluation side of `data/realprefs/split.json` (`read`), each pair read along its
objective's head (`model.head_directions`). The instruments measure, per objective, the
`INSTRUMENT_PAIRS` evaluation pairs with the smallest `sha256("realprefs-instruments:" + pair_id)`
(`instrument_pairs`; `--max-pairs N` takes N instead, for a small run), a rule fixed before any
data was seen (docs/realprefs-plan.md). The accuracy is scored on every evaluation pair
(`heldout.py`). A pair is token ids under the study's budget (`budget.encode`), its `seed_id` the
split's group (a dialogue's first human turn, a post or article), which the off-distribution
cross-fit and every bootstrap resample as one unit.

**What is measured** (`shard.py`), per instrument pair along its objective's head:

- attribution of embed, every attention block, MLP and head, and the bias (the frozen-LayerNorm
  decomposition, measure/models/bert.py);
- block patching (the twelve `attn_L{i}`, `mlp_L{i}`) in `mean`, `resample` and `swap` modes, head
  patching (the 72 `head_L{i}_H{j}`) in `mean` mode only, each with its off-distribution score;
- the trained blocks (the top `model.SETTINGS["trained_layers"]` layers' attention and MLP)
  patched together in `mean` mode;
- second stage (`followup`): per objective, its blocks ordered by their `mean` patch score over
  all its instrument pairs, the first k patched together, k = 1..12 (the curve);
- the null: `NULL_DIRECTIONS` random unit directions (`null_directions`), read off the same clean
  and patched passes (the read-outs projected on all of them at once) and the same attribution;
  only their sums per objective are kept.

**The reduction, stated before any trained model was measured.** The full grid (every block and
head in all three modes) costs about three times the chosen one; on this machine's one-thread
portable mode the chosen grid alone is hours (`measure plan --study realprefs`, docs/measure.md).
Reduced by three rules: `INSTRUMENT_PAIRS` (500) pairs per objective, never fewer; heads patched in
`mean` mode only; blocks in all three modes. Shards hold the pairs of one objective of similar
length (`arrange`), so little padding is computed.

**Resample** (`resample_sources`): each sequence (a pair's chosen or rejected reply) takes its
source from the other instrument pairs of its objective: a draw, with replacement across
sequences, uniform over their sequences (chosen or rejected alike), from `random.Random` seeded by
the first 8 bytes of `sha256("realprefs-resample:<seed>:<objective>")`, in plan order. On the
pooled read a component's output is shifted so that its pooled value becomes the source's
(`patching.replacement`), as `swap` does with the partner's.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bundle_kit import localize

from measure.errors import MeasureError
from measure.runner.definition import Definition
from measure.runner.reads import Read
from measure.studies.realprefs import budget, estimate, heldout, model as realprefs, shard, summary
from measure.studies.realprefs.data import OBJECTIVES
from measure.studies.realprefs.grid import (BLOCK_MODES, HEAD_MODES, INSTRUMENT_PAIRS, INSTRUMENT_RULE,
                                            NULL_DIRECTIONS, NULL_SEED, RESAMPLE_RULE, instrument_draw,
                                            null_directions, resample_sources)
from measure.studies.realprefs.split import SPLIT_FILE

# row kind -> bundle file, first stage then second (`files`)
FIRST = {"attribution": localize.FILES["attribution"], "patching": localize.FILES["patching"],
         "blocks": localize.FILES["blocks"], "heads": localize.FILES["heads"], "null": localize.FILES["null"]}
SECOND = {"curve": localize.FILES["curve"], "null_curve": localize.FILES["null_curve"]}


class RealprefsStudy(Definition):
    """The realprefs study on the common runner (`python -m measure run --model realprefs --study realprefs`)."""

    pairs_file = SPLIT_FILE

    def read(self, pairs_file: Path) -> list[dict]:
        """Every evaluation pair of the verified data, as rows (`dimension` = objective,
        `seed_id` = group); `--pairs` naming another file is refused."""
        from measure.studies.realprefs.data import load_pairs
        from measure.studies.realprefs.split import load_split

        if Path(pairs_file).resolve() != SPLIT_FILE.resolve():
            raise MeasureError(f"--pairs {pairs_file}: the realprefs study reads the evaluation side of "
                               f"{SPLIT_FILE.name} (data/realprefs/); give no --pairs")
        pairs = load_pairs()
        side = load_split(pairs)
        return [{"dimension": p.objective, "pair_id": p.pair_id, "seed_id": p.group, "prompt": p.prompt,
                 "chosen": p.chosen, "rejected": p.rejected, "source": p.source, "line": p.line}
                for p in pairs if side[p.pair_id] == "eval"]

    def select(self, pairs: list[dict], config) -> list[dict]:
        """Per objective (`--dimensions` to choose), the instrument pairs: INSTRUMENT_PAIRS, or
        `--max-pairs`, by INSTRUMENT_RULE."""
        wanted = config.dimensions or OBJECTIVES
        unknown = [d for d in wanted if d not in OBJECTIVES]
        if unknown:
            raise MeasureError(f"--dimensions: {', '.join(unknown)} is not an objective ({', '.join(OBJECTIVES)})")
        n = config.max_pairs or INSTRUMENT_PAIRS
        out = []
        for objective in OBJECTIVES:
            if objective in wanted:
                mine = sorted((p for p in pairs if p["dimension"] == objective), key=lambda p: instrument_draw(p["pair_id"]))
                out += mine[:n]
        return out

    def encode(self, adapter, pair: dict, where: str) -> tuple[list[int], list[int]]:
        """Both sides under the study's token budget (`budget.encode`: prompt tail and reply, 128 tokens)."""
        return (budget.encode(adapter.tokenizer, pair["prompt"], pair["chosen"]),
                budget.encode(adapter.tokenizer, pair["prompt"], pair["rejected"]))

    def arrange(self, pairs: list[dict], seqs: list) -> tuple[list[dict], list]:
        """Objective by objective, by the longer side's length, then by the instrument draw: the
        shards then hold sequences of similar length, padded little."""
        key = {p["pair_id"]: (OBJECTIVES.index(p["dimension"]), max(map(len, s)), instrument_draw(p["pair_id"]))
               for p, s in zip(pairs, seqs)}
        order = sorted(range(len(pairs)), key=lambda i: key[pairs[i]["pair_id"]])
        return [pairs[i] for i in order], [seqs[i] for i in order]

    def shards(self, pairs: list[dict], seqs: list, size: int) -> list[list[int]]:
        """`size` pairs in a row, never across two objectives (a shard's second stage patches
        its objective's sets)."""
        out, start = [], 0
        for i in range(1, len(pairs) + 1):
            if i == len(pairs) or pairs[i]["dimension"] != pairs[start]["dimension"] or i - start == size:
                out.append(list(range(start, i)))
                start = i
        return out

    def reads(self, adapter, pairs: list[dict], config) -> list[Read]:
        """One read: each pair along its objective's head, blocks in BLOCK_MODES, heads in
        HEAD_MODES, the resample sources of `resample_sources`."""
        W, b = realprefs.head_directions(adapter.model, [p["dimension"] for p in pairs])
        return [Read(directions=W, biases=b, modes=BLOCK_MODES, head_modes=HEAD_MODES, lens=False, heads=True,
                     patch_heads=True, sources=resample_sources(pairs, config.seed))]

    def identity(self, adapter, pairs: list[dict]) -> dict:
        """The model's training report's sha256s (when it has one), the rules and the null's seed."""
        report = Path(adapter.path) / realprefs.REPORT_FILE
        trained = {}
        if report.is_file():
            doc = json.loads(report.read_text(encoding="utf-8"))
            trained = {k: doc.get(k) for k in ("delta_sha256", "model_sha256", "trunk_sha256")}
        null = null_directions(adapter.hidden)
        return {**trained, "baselines_sha256": heldout.baseline_identity(), "instrument_rule": INSTRUMENT_RULE, "resample_rule": RESAMPLE_RULE,
                "null_directions": NULL_DIRECTIONS, "null_seed": NULL_SEED,
                "null_sha256": hashlib.sha256(null.numpy().tobytes()).hexdigest(),
                "token_budget": budget.MAX_TOKENS}

    def files(self, plan) -> dict[str, str]:
        """The first stage's files, or the second's."""
        return dict(FIRST if plan.payload is None else SECOND)

    def measure(self, plan, stats, k: int) -> dict[str, list[dict]]:
        """Shard k's rows (`shard.first` or, in the second stage, `shard.second`)."""
        return shard.first(plan, stats, k) if plan.payload is None else shard.second(plan, stats, k)

    def reduce(self, kind: str, rows: list[dict]) -> list[dict]:
        """The null's and the heads' per-shard sums added up per objective (and direction, head)."""
        return shard.reduce(kind, rows)

    def followup(self, plan, rows: dict[str, list[dict]]):
        """{"orders": {objective: blocks by mean patch score, largest first, ties in model order}}."""
        return shard.orders(rows)

    def estimate(self, config, json_path=None) -> int:
        """`measure plan --model realprefs --study realprefs` (`estimate.estimate_command`)."""
        return estimate.estimate_command(config, json_path)

    def extra_files(self, plan) -> dict[str, str]:
        """`heldout_per_pair.jsonl` (every evaluation pair scored along every head, beside the
        baselines' margins) and `heads.json` (the heads' rows)."""
        return heldout.files(plan)

    def finish(self, plan, staging: Path, written, put) -> dict:
        """golden.json and README.md (`summary.summarise`)."""
        return summary.summarise(plan, staging, put)


DEFINITION = RealprefsStudy()
