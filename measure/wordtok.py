"""A word-level tokenizer for the organism: one readable word per token, stored as word_vocab.json.

The organism's inputs are `<bos> prompt words <sep> response words <eos>`; the reward is read at
`<eos>`, the scoring token. Unknown words are an error, never silently mapped, so a typo in a
pairs file cannot turn into a measurement.
"""
from __future__ import annotations

import json
from pathlib import Path

from .errors import MeasureError

VOCAB_FILE = "word_vocab.json"
SPECIALS = ("<pad>", "<bos>", "<sep>", "<eos>")


class WordTokenizer:
    def __init__(self, words: list[str], path: str = VOCAB_FILE):
        if list(words[: len(SPECIALS)]) != list(SPECIALS):
            raise MeasureError(f"{path}: the vocabulary must start with {', '.join(SPECIALS)}")
        self.words = list(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        if len(self.ids) != len(self.words):
            raise MeasureError(f"{path}: the vocabulary repeats a word")
        self.path = path
        self.pad_id, self.bos_id, self.sep_id, self.eos_id = (self.ids[s] for s in SPECIALS)

    @classmethod
    def load(cls, folder: Path) -> "WordTokenizer":
        path = Path(folder) / VOCAB_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MeasureError(f"{path}: cannot read the word vocabulary ({exc})") from None
        return cls(data["words"], str(path))

    def save(self, folder: Path) -> None:
        text = json.dumps({"words": self.words}, indent=1) + "\n"
        (Path(folder) / VOCAB_FILE).write_text(text, encoding="utf-8")

    def _word_ids(self, text: str, where: str) -> list[int]:
        out = []
        for word in text.split():
            if word not in self.ids:
                raise MeasureError(f"{where}: word {word!r} is not in {self.path}")
            out.append(self.ids[word])
        return out

    def encode_pair_side(self, prompt: str, response: str, where: str = "input") -> list[int]:
        return ([self.bos_id] + self._word_ids(prompt, where) + [self.sep_id]
                + self._word_ids(response, where) + [self.eos_id])

    def decode(self, ids) -> str:
        return " ".join(self.words[i] for i in ids)
