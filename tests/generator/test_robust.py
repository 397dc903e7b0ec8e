"""The robustness rule (site_src/robust.py): a sentence may call a conclusion robust only beside a
share of specifications of at least 0.9 in which it holds; the build refuses any other."""
import pytest

from generator_helpers import run, tree_digest, write_page

from site_src import robust

CURVE = '{\n  "gap": {"share": 0.74, "share_attribution_ahead": 0.26},\n  "attribution": {"share": 0.95},\n  "value": 0.97\n}\n'

# (sentence, refused?): every sentence sits on a line of its own, the page's line 6 onwards
SENTENCES = [
    ("Attribution is robust: it holds in {{ data/curve.json#attribution/share | fmt .0% }} of them.", False),
    ("In {{ data/curve.json#attribution/share }} of the choices the result is robustly above chance.", False),
    ("Which method is ahead is not robust ({{ data/curve.json#gap/share }}).", False),
    ("The gap is never robust.", False),
    ("The gap is robust.", True),                                                      # no share shown
    ("The gap is robust, holding in {{ data/curve.json#gap/share }} of the choices.", True),   # too low
    ("The gap is robust: {{ data/curve.json#value }}.", True),                          # not a share
    ("Robustness: patching leads in {{ data/curve.json#gap/share_attribution_ahead }}.", True),
    ("It holds in {{ data/curve.json#attribution/share }}. The gap is robust too.", True),  # another sentence
]
FIRST = 6   # the line of the first sentence (front matter of 4 lines, then a blank line)


def _page(sentences) -> str:
    return "\n" + "\n\n".join(sentences) + "\n"


def test_robust_is_refused_without_a_share_of_at_least_the_threshold(site, capsys):
    (site / "data" / "curve.json").write_text(CURVE)
    assert run(site) == 0
    capsys.readouterr()
    before = tree_digest(site / "public")
    write_page(site, "claims.md", _page([s for s, _ in SENTENCES]))
    assert run(site) == 1
    err = capsys.readouterr().err
    flagged = {int(line.split("content/claims.md:", 1)[1].split(":", 1)[0])
               for line in err.splitlines() if "content/claims.md:" in line and "calls a conclusion robust" in line}
    expected = {FIRST + 2 * i for i, (_s, refused) in enumerate(SENTENCES) if refused}
    assert flagged == expected, err
    assert "(shown: {{ data/curve.json#gap/share }} = 0.74)" in err
    assert tree_digest(site / "public") == before


def test_robust_with_its_share_builds(site, capsys):
    (site / "data" / "curve.json").write_text(CURVE)
    write_page(site, "claims.md", _page([s for s, refused in SENTENCES if not refused]))
    assert run(site) == 0, capsys.readouterr().err


def test_robust_in_front_matter_is_refused(site, capsys):
    write_page(site, "claims.md", "\nText.\n", "title: T\nsummary: A robust result.\n")
    assert run(site) == 1
    assert "content/claims.md:3: 'robust' calls a conclusion robust" in capsys.readouterr().err


@pytest.mark.parametrize("text, words", [
    ("a robust result", ["robust"]), ("not robust", []), ("no longer robust", []), ("isn't robust", []),
    ("never quite robust", []), ("Robustly so", ["Robustly"]), ("robustness", ["robustness"]),
    ("robusta coffee", []),
    ("not only robust", ["robust"]), ("nothing if not robust", ["robust"]), ("isn't just robust", ["robust"]),
    ("not not robust", ["robust"]), ("does not seem robust", []), ("not at all robust", []), ("non-robust", []),
    ("rob\u00adust", ["robust"]), ("rob\u200bust", ["robust"]), ("rob\u2060ust", ["robust"]),
    ("r\u043ebust", ["robust"]), ("\U0001d42b\U0001d428\U0001d41b\U0001d42e\U0001d42c\U0001d42d", ["robust"]),
    ("ro\u0301bust", ["robust"]), ("\u0280obust", ["robust"]), ("rob\u3164ust", ["robust"]),
    ("The gap is \u202etsubor\u202c.", ["robust"]), ("tsubor, no control", []),
])
def test_claimed_words(text, words):
    assert robust.claimed_words(text) == words


def test_share_keys():
    assert robust.is_share(("key_recovery", "spec_curve", "gap", "share"))
    assert robust.is_share(("gap", "share_patching_ahead"))
    assert not robust.is_share(("gap", "shares"))
    assert not robust.is_share(("list", 0))
    assert not robust.is_share(())


# ---------------------------------------------------------------- what the reader reads (issue 28, items 2 and 3)

GLOSSARY = "terms:\n  gap:\n    term: gap\n    definition: Patching's key recovery minus attribution's.\n"
# Each published the word to readers while the rule read the source: every one must be refused.
# The share shown (0.74) is below the threshold, so a sentence that is a claim fails.
SHARE = "{{ data/curve.json#gap/share }}"
DISGUISED = [
    "The gap is {{! robust }}, in " + SHARE + ".",
    "The gap is rob{{!u}}st, in " + SHARE + ".",
    "The gap is *rob*ust, in " + SHARE + ".",
    "The gap is rob<!-- -->ust, in " + SHARE + ".",
    "The gap is `robust`, in " + SHARE + ".",
    "The gap is $\\text{robust}$, in " + SHARE + ".",
    "The [[term:gap|robust gap]] holds in " + SHARE + ".",
    "The gap holds in " + SHARE + " ![the gap is robust](../assets/site.css).",
    "The gap is rob&shy;ust, in " + SHARE + ".",
    "The gap is rob\u00adust, in " + SHARE + ".",
    "The gap is rob\u200bust, in " + SHARE + ".",
    "The gap is rob&#8203;ust, in " + SHARE + ".",
    "The gap is r\u043ebust, in " + SHARE + ".",                                   # a Cyrillic о
    "The gap is not only robust but large, in " + SHARE + ".",
    "The gap is nothing if not robust, in " + SHARE + ".",
    "The gap isn't just robust, it is large, in " + SHARE + ".",
    "The gap is \uff52\uff4f\uff42\uff55\uff53\uff54, in " + SHARE + ".",           # full-width letters
    "The gap is r\u03bfbust, in " + SHARE + ".",                                   # a Greek omicron
    "The gap is rob<span>u</span>st, in " + SHARE + ".",
    "The gap is [robust](../ \"x\"), in " + SHARE + ".",
    "The gap holds in " + SHARE + " [of them](../ \"a robust result\").",          # a link's tooltip
    "The gap is not not robust, in " + SHARE + ".",
    "The gap is \u202etsubor\u202c, in " + SHARE + ".",                          # shown right to left
    "The gap is rob[u](../)st, in " + SHARE + ".",
    "The gap is &#x72;obust, in " + SHARE + ".",
    "The <abbr title=\"robust\">gap</abbr> holds in " + SHARE + ".",
    "The gap <img alt=\"is robust\" src=\"../assets/site.css\"> holds in " + SHARE + ".",
]
NEGATED = [   # negations read narrowly still read as negations
    "Which method leads is not robust, in " + SHARE + ".",
    "The gap isn't robust (" + SHARE + ").",
    "The gap does not seem robust (" + SHARE + ").",
    "The gap is not at all robust (" + SHARE + ").",
    "The gap is no longer robust.",
    "A non-robust gap.",
]


RAW_FRONT = "title: Claims\nsummary: Claims in disguise.\nraw_html: true\n"
RAW_FIRST = RAW_FRONT.count("\n") + 4     # the page line of the first sentence


def _reading_site(site, sentences, front=RAW_FRONT):
    (site / "data" / "curve.json").write_text(CURVE)
    (site / "content/glossary.yaml").write_text(GLOSSARY)
    write_page(site, "glossary.md", "```glossary\nsource: content/glossary.yaml\n```\n",
               "title: Glossary\nsummary: Every term.\n")
    write_page(site, "claims.md", _page(sentences), front)


def _robust_lines(err: str, page: str = "content/claims.md") -> set:
    return {int(line.split(f"{page}:", 1)[1].split(":", 1)[0])
            for line in err.splitlines() if f"{page}:" in line and "calls a conclusion robust" in line}


def test_every_disguise_of_the_word_is_read_as_the_reader_reads_it(site, capsys):
    """Issue 28, item 2: 20 of 22 disguised forms built; the rule read the source, not the page."""
    _reading_site(site, DISGUISED + NEGATED)
    run(site)
    err = capsys.readouterr().err
    assert _robust_lines(err) == {RAW_FIRST + 2 * i for i in range(len(DISGUISED))}, err


def test_negations_and_shares_still_build(site, capsys):
    _reading_site(site, NEGATED + [
        "Attribution is *robust*: it holds in {{ data/curve.json#attribution/share }}.",
        "It holds in {{ data/curve.json#attribution/share }} of them: rob&shy;ust.",
    ])
    assert run(site) == 0, capsys.readouterr().err


def test_a_raw_html_block_and_display_math_are_read(site, capsys):
    _reading_site(site, ['<div class="note">\n<p>The gap is <b>rob</b>ust.</p>\n</div>',
                         "$$\n\\text{robust}\n$$", "<p title=\"robust\">A tooltip.</p>"])
    assert run(site) == 1
    assert _robust_lines(capsys.readouterr().err) == {RAW_FIRST, RAW_FIRST + 4, RAW_FIRST + 8}


def test_a_glossary_definition_is_held_to_the_rule(site, capsys):
    """Issue 28, item 3: "... is robust." was published on the glossary page and in every tooltip."""
    _reading_site(site, ["Text."])
    (site / "content/glossary.yaml").write_text(
        GLOSSARY + "  lens:\n    term: lens\n    also: [r\u043ebust lens]\n    definition: >-\n"
                   "      The reward lens, which is rob\u00adust.\n")
    assert run(site) == 1
    err = capsys.readouterr().err
    assert "content/glossary.yaml:7: term lens: 'robust' calls a conclusion robust" in err   # the other form
    assert "content/glossary.yaml:8: term lens: 'robust' calls a conclusion robust" in err   # the definition


def test_every_published_text_is_held_to_the_rule(site, capsys):
    """Issue 28, item 3: front matter, site.yaml, a findings box's title, a table's headers, a
    figure's drawn text and caption go through the same rule."""
    _reading_site(site, [
        "```table\nsource: data/golden.json#per_dimension_rho\ncolumns: [dimension, robust rho]\n"
        "caption: The gap is robust.\n```",
        "```figure\nkind: heatmap\nid: h\ncaption: A matrix.\nclaim: observational\n"
        "data: {matrix: data/golden.json#inline}\noptions: {value_title: a robust value}\n```",
    ], front="title: The r\u043ebust gap\nsummary: A page.\n")
    config = site / "content/site.yaml"
    config.write_text(config.read_text().replace("title:", "description: A robust site.\ntitle:", 1))
    index = site / "content/index.md"
    index.write_text(index.read_text() + "\n```findings\ntitle: Robust findings\nclaims:\n"
                     "  - text: It is {{ data/golden.json:3 }}.\n    claim: causal\n    study: x.md\n```\n")
    assert run(site) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "calls a conclusion robust" in line]
    for where in ("content/claims.md:2: 'robust'", "content/claims.md:8: table columns: 'robust'",
                  "content/claims.md:9: 'robust'", "content/claims.md:18: figure h: 'robust'",
                  "content/site.yaml:1: 'robust'", "findings block: 'Robust'"):
        assert any(where in line for line in err), (where, err)


def test_ascii_text_folds_to_itself_as_the_full_fold_would_have_it():
    """fold() returns ASCII text unchanged without folding it; that is right only while every
    ASCII character comes through each step of the fold as itself."""
    import unicodedata
    every = "".join(chr(i) for i in range(128))
    kept = "".join(c for c in every if unicodedata.category(c) != "Cf")
    kept = robust._IGNORABLE.sub("", unicodedata.normalize("NFKC", kept))
    kept = "".join(c for c in unicodedata.normalize("NFD", kept) if unicodedata.category(c) != "Mn")
    assert unicodedata.normalize("NFC", kept).translate(robust._CONFUSABLES) == every
    assert robust.fold(every) == every
    assert robust.fold("r\u043ebust") == "robust"   # a Cyrillic o still folds
