"""One package per study: its data builder, its model builder or trainer, its bundle text.

The tables below are the only place a model's or a study's name selects code: the runner and the
command line look names up here (as `module:attribute`, imported only when asked for), and never
branch on a name themselves.
"""
from __future__ import annotations

import importlib
from pathlib import Path

# `--model NAME`: the repository's own models, each a function giving its folder (made if need be).
NAMED_MODELS = {
    "organism": "measure.studies.organism.train:model_folder",
    "minilm": "measure.studies.minilm.model:ensure_model",  # assembled from the trunk and the heads
    "realprefs": "measure.studies.realprefs.model:ensure_model",  # assembled from the trunk and the delta
}
# `--study NAME`: studies with their own `Definition` (measure/runner/definition.py).
DEFINITIONS = {
    "minilm-balanced": "measure.studies.minilm.study:DEFINITION",
    "realprefs": "measure.studies.realprefs.study:DEFINITION",
}
# `measure train --model NAME`: each a function (out folder or None, seed, epochs or None, *,
# max_pairs=None, estimate=False) -> exit status; a trainer refuses an option it has no use for.
TRAINERS = {
    "organism": "measure.studies.organism.train:train_command",
    "minilm": "measure.studies.minilm.model:train_command",
    "realprefs": "measure.studies.realprefs.model:train_command",
}


def resolve(where: str):
    """The object a table entry names (`module:attribute`)."""
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)


def named_model(spec: str) -> Path | None:
    """The folder of a named model of this repository, or None if `spec` names none."""
    return Path(resolve(NAMED_MODELS[spec])()) if spec in NAMED_MODELS else None
