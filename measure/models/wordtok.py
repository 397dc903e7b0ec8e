"""The organism's word-level tokenizer, as a standard Hugging Face tokenizer (`tokenizer.json`).

One readable word per token (a `tokenizers` WordLevel model over whitespace-split words). Its
chat template lays a pair side out as `<bos> prompt <sep> response <eos>`; the reward is read at
`<eos>`, the scoring token. The WordLevel model has no unknown token, so a word outside the
vocabulary is an error, never silently mapped: a typo in a pairs file cannot become a
measurement. `AutoTokenizer.from_pretrained(folder)` loads it like any model's tokenizer.
"""
from __future__ import annotations

from pathlib import Path

SPECIALS = ("<pad>", "<bos>", "<sep>", "<eos>")
# A user turn is the prompt, an assistant turn the response.
CHAT_TEMPLATE = ("{{ '<bos>' }}{% for m in messages %} {{ m['content'] }} "
                 "{{ '<sep>' if m['role'] == 'user' else '<eos>' }}{% endfor %}")
UNKNOWN = "<unk>"  # named so the WordLevel model refuses unknown words; not in the vocabulary


def word_tokenizer(words: list[str]):
    """A fast tokenizer whose ids are the positions in `words` (which start with SPECIALS)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if tuple(words[: len(SPECIALS)]) != SPECIALS or len(set(words)) != len(words):
        raise ValueError(f"the vocabulary must start with {', '.join(SPECIALS)} and repeat no word")
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=UNKNOWN))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<bos>",
                                  sep_token="<sep>", eos_token="<eos>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def save_word_tokenizer(words: list[str], folder: Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and chat_template.jinja into `folder`."""
    word_tokenizer(words).save_pretrained(folder)
