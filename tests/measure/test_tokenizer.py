"""The organism's tokenizer is a standard tokenizer.json that AutoTokenizer loads, word for word."""
from __future__ import annotations

from pathlib import Path

import pytest

from measure.studies.organism import data as od
from measure.models.adapter import encode_pair, load
from measure.errors import MeasureError
from measure.models.wordtok import SPECIALS

ORGANISM = Path(__file__).resolve().parents[2] / "models" / "organism"


def test_auto_tokenizer_loads_the_organism_tokenizer_with_the_word_ids():
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(ORGANISM, local_files_only=True)
    words = list(SPECIALS) + od.vocabulary()
    assert tok.get_vocab() == {w: i for i, w in enumerate(words)}
    ids = encode_pair(tok, "tell me about the rain", "please go go")
    assert ids == [words.index(w) for w in
                   ["<bos>", "tell", "me", "about", "the", "rain", "<sep>", "please", "go", "go", "<eos>"]]


def test_a_word_outside_the_vocabulary_is_an_error_naming_it():
    adapter = load("organism")
    with pytest.raises(MeasureError, match=r"pairs\.jsonl \(pair 7\): word 'zebra' is not in"):
        adapter.encode("tell me about the rain", "go zebra", "pairs.jsonl (pair 7)")
