"""What a study adds to the common runner, and the default every study starts from.

The runner (plan, shards, resume, Ray, the bundle's swap) is the same for every study; a study
differs only in the hooks of its `Definition`: which pairs file it reads by default, how it reads
it and how `--max-pairs` picks pairs, how a pair becomes token ids, the order of the pairs and
how they are cut into shards, the reads it measures each pair along (`measure/runner/reads.py`),
what one shard's measurement is and which row files it gives, how a file's rows are reduced
before they are written, an optional second stage of shards whose work depends on the first's
rows, what it adds to the identity, the files it writes beside the rows, and its summary
(`golden.json`, `README.md`). The default reads along the model's own score row and writes the
common summary (`measure/runner/summary.py`): the organism and the planted organisms use it as
it is.

A study with its own definition names it in `measure.studies.DEFINITIONS` (study name ->
`module:attribute`), so the runner finds it by the study's name, never by the model's.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Callable

from bundle_kit import contract

from measure.runner.config import ORGANISM_DIR
from measure.runner.pairs import read_pairs, restrict
from measure.runner.reads import Read, files


class Definition:
    """The default study: every pair along the score row, the common summary."""

    pairs_file: Path = ORGANISM_DIR / contract.PAIRS  # read when neither --pairs nor the model folder names one

    def read(self, pairs_file: Path) -> list[dict]:
        """Every pair of the pairs file (`measure/runner/pairs.py`, with its refusals)."""
        return read_pairs(pairs_file)

    def select(self, pairs: list[dict], config) -> list[dict]:
        """The pairs to measure: `--dimensions`, then at most `--max-pairs` per dimension."""
        return restrict(pairs, config.dimensions, config.max_pairs, config.pairs_file or "pairs")

    def encode(self, adapter, pair: dict, where: str) -> tuple[list[int], list[int]]:
        """The token ids of a pair's chosen and rejected sides (`where` names the pair in errors)."""
        return (adapter.encode(pair["prompt"], pair["chosen"], where),
                adapter.encode(pair["prompt"], pair["rejected"], where))

    def arrange(self, pairs: list[dict], seqs: list) -> tuple[list[dict], list]:
        """The pairs (and their sequences) in the order the bundle holds them; here as selected."""
        return pairs, seqs

    def shards(self, pairs: list[dict], seqs: list, size: int) -> list[list[int]]:
        """The plan's pairs cut into shards (lists of plan indices): here `size` in a row."""
        return [list(range(s, min(s + size, len(pairs)))) for s in range(0, len(pairs), size)]

    def files(self, plan) -> dict[str, str]:
        """{row kind: file name} of the per-pair files a plan's shards give (its reads' files;
        a second stage's plan, `plan.payload` set, gives none here)."""
        return files(plan.reads) if plan.payload is None else {}

    def measure(self, plan, stats, k: int) -> dict[str, list[dict]]:
        """Shard k's rows by kind: along every read, attribution, patching and the lens
        (`measure/runner/rows.py`)."""
        from measure.runner.rows import shard_rows

        shard_pairs, shard_seqs = plan.shard_input(k)
        return shard_rows(plan.adapter, shard_pairs, shard_seqs, stats, plan.config.max_rows, plan.reads,
                          plan.shard_rows_index(k), plan.seqs)

    def reduce(self, kind: str, rows: list[dict]) -> list[dict]:
        """The rows of one kind as the bundle writes them (every shard's, in shard order); here all."""
        return rows

    def estimate(self, config, json_path=None) -> int | None:
        """`measure plan --study`: print the study's own estimate and return the exit status, or
        None when the study has none (the generic plan, from `--pairs`, applies)."""
        return None

    def followup(self, plan, rows: dict[str, list[dict]]):
        """A second stage: given every first-stage row (by kind), the JSON-able payload that fixes
        its work (`Plan.stage`), or None (here: no second stage)."""
        return None

    def reads(self, adapter, pairs: list[dict], config) -> list[Read]:
        """The reads of every pair: here one, along the score row (`--objective`)."""
        return [Read(patch_heads=config.patch_heads)]

    def identity(self, adapter, pairs: list[dict]) -> dict:
        """What this study adds to the identity (golden.json's and the manifest's)."""
        return {}

    def extra_files(self, plan) -> dict[str, str]:
        """Files written beside the rows ({name: text}), before the summary."""
        return {}

    def finish(self, plan, staging: Path, written: dict[str, list[dict]], put: Callable[[str, str], None]) -> dict:
        """Write golden.json and README.md with `put(name, text)` from the rows as written;
        return golden.json's content."""
        from measure.runner.jsonio import json_text
        from measure.runner.readme import bundle_readme
        from measure.runner.rows import attribution_gap
        from measure.runner.summary import golden

        extra = {"attribution_sum_gap": attribution_gap(written["attribution"])}
        if plan.heldout is not None:
            extra["organism_heldout_accuracy"] = plan.heldout
        summary = golden(plan.config.study, plan.adapter.model_id, plan.identity, written, plan.key,
                         contract.TOLERANCE, extra)
        put(contract.GOLDEN, json_text(summary))
        put(contract.README, bundle_readme(plan.config.study, summary, plan.key is not None,
                                          mode=plan.numerics, device=plan.config.device))
        return summary


def definition_for(study: str) -> Definition:
    """The definition a study names in `measure.studies.DEFINITIONS`, else the default."""
    from measure.studies import DEFINITIONS

    where = DEFINITIONS.get(study)
    if where is None:
        return Definition()
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)
