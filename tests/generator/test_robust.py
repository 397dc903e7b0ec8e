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
])
def test_claimed_words(text, words):
    assert robust.claimed_words(text) == words


def test_share_keys():
    assert robust.is_share(("key_recovery", "spec_curve", "gap", "share"))
    assert robust.is_share(("gap", "share_patching_ahead"))
    assert not robust.is_share(("gap", "shares"))
    assert not robust.is_share(("list", 0))
    assert not robust.is_share(())
