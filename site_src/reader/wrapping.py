"""How a page's markup reads and wraps: break opportunities in long inline code, the blocks
search leaves out, and the word boundaries search keeps.

Break opportunities in long inline code (a fixture path, a key path, a component name), so
that it wraps at its own separators on a narrow screen instead of widening the page, and the
punctuation after it never starts a line: CSS's `overflow-wrap: anywhere`, the alternative, also
lets a line break between the code and the comma that follows it.

`<wbr>` adds no text: copying the code still gives it whole. Code inside <pre> is left alone.
"""
from __future__ import annotations

import re

_PRE = re.compile(r"(<pre\b.*?</pre>)", re.S)
_CODE = re.compile(r"(<code\b[^>]*>)([^<]{16,})(</code>)")
# after a path's or a key's separators; not after "." or "-", which would split "reproduce.py"
_AFTER = re.compile(r"([/_#:|=])(?=[^\s/_#:|=])")


def breakable_code(html: str) -> str:
    """`html` with <wbr> after each separator of every long inline code element."""
    parts = _PRE.split(html)
    for i in range(0, len(parts), 2):   # the even parts lie outside <pre>
        parts[i] = _CODE.sub(lambda m: m.group(1) + _AFTER.sub(r"\1<wbr>", m.group(2)) + m.group(3), parts[i])
    return "".join(parts)


_PRE_TAG = re.compile(r"<pre\b(?![^>]*data-pagefind-ignore)")


def unindexed_blocks(html: str) -> str:
    """`html` with every <pre> (code, a directive's source, a program's output) marked for the
    search index to leave out, so that search excerpts come from the rendered prose."""
    return _PRE_TAG.sub("<pre data-pagefind-ignore", html)


# Elements a browser sets apart (a block, a table cell, a list's option) that Pagefind 1.5 runs
# into the next element's text when no whitespace stands between them: "<dt>claim</dt><dd>causal"
# was indexed as "claimcausal", "<option>a</option><option>b" as "ab". A line break after each
# closing tag keeps the words apart; between these elements it changes nothing on the screen.
_GLUED = re.compile(r"(</(?:caption|dd|dt|figcaption|option|summary|th)>)(?=<)")


def word_boundaries(html: str) -> str:
    """`html` with a line break after every closing tag that search would otherwise run into the
    next element's text; <pre> is left alone."""
    parts = _PRE.split(html)
    for i in range(0, len(parts), 2):   # the even parts lie outside <pre>
        parts[i] = _GLUED.sub("\\1\n", parts[i])
    return "".join(parts)
