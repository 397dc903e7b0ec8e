"""The bundle contract: file names, row fields, patching modes and the check's tolerance.

Standard library only: this file ships inside every bundle zip beside `reproduce.py` and
`rankstats.py`. `measure/` writes to it, `site_src/` and `reproduce.py` read by it, and the
tests check against it; nobody spells these names anywhere else.

The tolerance lives here, not in `golden.json`: a check must not take its bar from the file it
checks.
"""
from __future__ import annotations

# ---------------------------------------------------------------- files of a study bundle
ATTRIBUTION = "attribution_per_pair.jsonl"
PATCHING = "patching_per_pair.jsonl"
HEADS_ATTRIBUTION = "heads_attribution_per_pair.jsonl"
HEADS_PATCHING = "heads_patching_per_pair.jsonl"
LENS = "lens_per_pair.jsonl"
PAIRS = "pairs.jsonl"
GOLDEN = "golden.json"
MANIFEST = "manifest.json"
KEY = "key.json"
README = "README.md"
CORRECTIONS = "CORRECTIONS.md"

REQUIRED_FILES = (README, ATTRIBUTION, GOLDEN, PATCHING)
# Copied from bundle_kit/ into every zip at build time.
KIT_FILES = ("contract.py", "hiddenkeys.py", "keyrecovery.py", "localize.py", "rankstats.py", "record.py",
             "reproduce.py")

# ---------------------------------------------------------------- rows
ROW_HEAD = ("model", "dimension", "pair_id", "seed_id")
ATTRIBUTION_ROW = ROW_HEAD + ("component", "kind", "layer", "attribution", "attr_chosen",
                              "attr_rejected", "margin")
PATCHING_ROW = ROW_HEAD + ("component", "kind", "layer", "mode", "clean_margin",
                           "patched_margin", "effect", "moves_pct", "offdist_z", "offdist_flag")
LENS_ROW = ROW_HEAD + ("layer", "depth", "running_margin")
PAIR_ROW = ("dimension", "pair_id", "seed_id", "prompt", "chosen", "rejected")

# The fields the statistics need (a subset of the rows above).
ATTRIBUTION_FIELDS = ("dimension", "pair_id", "seed_id", "component", "attribution", "margin")
PATCHING_FIELDS = ("dimension", "pair_id", "seed_id", "component", "mode", "clean_margin", "effect")

COMPONENT_KINDS = ("embed", "attn", "mlp", "head", "bias")
KINDS_COMPARED = ("attn", "mlp")

# ---------------------------------------------------------------- patching
MODES = ("mean", "zero", "swap")
# Each response's output taken from a response of another pair (a study names the source of
# every sequence); measured by the studies that ask for it, never by default.
RESAMPLE = "resample"
RANK_MODE = "mean"

# ---------------------------------------------------------------- numbers
JSONL_PLACES = 8   # decimals of every float in per-pair JSONL
GOLDEN_PLACES = 6  # decimals of every float in golden.json
# Largest disagreement a recomputed value may have with golden.json. Values are rounded to 6
# decimals there, so half a unit in that place plus float noise stays well inside 1e-6.
TOLERANCE = 1e-6
