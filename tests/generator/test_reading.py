"""The reading layer's blocks and rules: the glossary (content/glossary.yaml, [[term:ID]], the page
and the warning for a term used before its definition) and the findings box (```findings)."""
from __future__ import annotations

import re

from generator_helpers import run, write_page

GLOSSARY = """terms:
  margin:
    term: margin
    also: [margins]
    definition: The chosen response's reward minus the rejected one's.
  patching:
    term: patching
    definition: Replace one component's output and watch the margin.
"""

STUDY_FRONT = ("title: Demo study\nsummary: A study page.\nsubject: tiny/Reward-Model\nquestion: Where is it?\n"
               "access: forward only\ntrust: exploratory\nclaim: observational vs causal\nbundle: demo\n")


def _study_site(site, monkeypatch):
    """Study pages need a bundle: a stand-in for site_src.bundles, as tests/generator/test_build.py does."""
    import site_src.bundles as bundles

    class FakeBundle:
        name = "demo"
        zip_href = "bundles/demo.zip"
        sha256 = "0" * 64

    monkeypatch.setattr(bundles, "build_bundle", lambda study_dir, repo_root, members=None: FakeBundle())
    monkeypatch.setattr(bundles, "public_files", lambda found: {"bundles/demo.zip": b"zip", "SHA256SUMS": b"sums\n"})
    monkeypatch.setattr(bundles, "verify_published", lambda public, html, bundle, page: None)
    (site / "templates/partials/bundle.html").write_text('<section id="bundle-{{ bundle.name }}"><h2>Reproduce this</h2></section>\n')


def _glossary_site(site, body: str, glossary: str = GLOSSARY):
    (site / "content/glossary.yaml").write_text(glossary)
    write_page(site, "glossary.md", "```glossary\nsource: content/glossary.yaml\n```\n",
               "title: Glossary\nsummary: Every term.\n")
    write_page(site, "terms.md", body, "title: Terms\nsummary: A page using terms.\n")


def test_a_term_links_to_the_glossary_with_its_definition(site, capsys):
    _glossary_site(site, "## The margin\n\nThe [[term:margin]] moves; [[term:patching|a patch]] moves it.\n")
    assert run(site) == 0
    html = (site / "public/terms/index.html").read_text()
    assert ('<a class="term" href="../glossary/#term-margin" data-term="margin" '
            'data-definition="The chosen response&#39;s reward minus the rejected one&#39;s.">margin</a>') in html
    assert 'href="../glossary/#term-patching"' in html and ">a patch</a>" in html
    glossary = (site / "public/glossary/index.html").read_text()
    assert re.search(r'<dt id="term-margin">margin <span class="glossary-also">\(also: margins\)</span></dt>\s*'
                     r"<dd>The chosen response&#39;s reward minus the rejected one&#39;s.</dd>", glossary)
    # a heading names a term without using it: no warning for this page
    assert "content/terms.md" not in capsys.readouterr().err


def test_a_term_used_before_its_definition_is_a_warning_not_an_error(site, capsys):
    _glossary_site(site, "Text.\n\nThe margins move before we say what a\n[[term:margin]] is. Then [patching](../) is named"
                         " in a link, and `patching` in code.\n")
    assert run(site) == 0
    err = capsys.readouterr().err
    assert ("warning: content/terms.md:7: glossary term 'margin' is used before it is defined on this page "
            "(it is linked only later, at line 8): link its first use, [[term:margin]] "
            "(definition at content/glossary.yaml:2)") in err
    assert "warning: content/terms.md:8: glossary term 'patching' is used before it is defined on this page: " in err
    # the link's text is not a use; the glossary page defines them all
    assert err.count("warning: content/terms.md") == 2 and "warning: content/glossary.md" not in err


def test_an_unknown_term_and_a_bad_glossary_fail_with_their_lines(site, capsys):
    bad = GLOSSARY.replace("Replace one component's output", "Replace 0.5 of the output") + "  margin2:\n    term: Margins\n    definition: Again.\n"
    _glossary_site(site, "A [[term:magrin]].\n", glossary=bad)
    assert run(site) == 1
    err = capsys.readouterr().err
    assert "content/terms.md:5: [[term:magrin]]: no such term in content/glossary.yaml; did you mean 'margin'?" in err
    assert "content/glossary.yaml:8: term patching: the definition holds the number '0.5'" in err
    assert "content/glossary.yaml:9: term margin2: 'Margins' is already a form of term margin" in err


def test_a_study_opens_with_three_to_five_findings_each_with_its_receipt(site, capsys, monkeypatch):
    _study_site(site, monkeypatch)
    (site / "bundles/demo/golden.json").write_text(
        '{\n  "study": "demo",\n  "mean_rho": 0.25,\n  "patching_effect": 0.5,\n  "attribution_score": 0.1\n}\n')
    body = ("```findings\nclaims:\n"
            "  - text: The mean rho is {{ golden.json:3 }}.\n    claim: observational vs causal\n"
            "  - text: Patching moves it {{ golden.json#patching_effect }}.\n    claim: causal\n"
            "  - text: Attribution reads {{ golden.json#attribution_score }}.\n    claim: observational\n"
            "```\n\n## Result\n\nText.\n")
    write_page(site, "studies/demo.md", body, STUDY_FRONT)
    assert run(site) == 0
    html = (site / "public/studies/demo/index.html").read_text()
    box = html[html.index('<section class="findings"'):html.index("</section>")]
    assert '<h2 id="findings-11">What this study found<' in box
    assert box.count('<p class="finding">') == 3 and box.count('class="ref"') == 3
    assert box.count("▮▯▯</span> exploratory") == 3          # the page's rung on each claim
    assert '<span class="chip claim claim-causal">causal</span>' in box
    assert html.index('class="findings"') < html.index('id="result"')   # findings first
    assert 'class="takeaway"' in html and "Attribution proposes; patching tests." in html


def test_a_findings_box_refuses_what_the_evidence_does_not_carry(site, capsys, monkeypatch):
    _study_site(site, monkeypatch)
    body = ("```findings\nclaims:\n"
            "  - text: A claim without its number.\n    claim: observational vs causal\n"
            "  - text: Registered {{ golden.json:3 }}.\n    claim: causal\n    trust: registered\n"
            "```\n")
    write_page(site, "studies/demo.md", body, STUDY_FRONT)
    write_page(site, "home.md", "```findings\nclaims:\n  - text: It is {{ golden.json:3 }}.\n"
                                "    claim: causal\n    study: studies/nope.md\n    cliam: high\n```\n",
               "title: Home\nsummary: S.\n")
    assert run(site) == 1
    err = capsys.readouterr().err
    assert "content/studies/demo.md:12: findings block: a study page states 3 to 5 findings, not 2" in err
    assert "content/home.md:6: findings block: claim 1: unknown key 'cliam'; did you mean 'claim'?" in err
    # with the schema broken the block is not drawn; fixed, its render checks run
    write_page(site, "home.md", "```findings\nclaims:\n  - text: It is {{ golden.json:3 }}.\n"
                                "    claim: causal\n    study: studies/nope.md\n```\n", "title: Home\nsummary: S.\n")
    body3 = body.replace("```\n", "  - text: Third {{ golden.json:3 }}.\n    claim: causal\n```\n", 1)
    write_page(site, "studies/demo.md", body3, STUDY_FRONT)
    assert run(site) == 1
    err = capsys.readouterr().err
    assert "content/studies/demo.md:12: findings block: claim 1: holds no value reference" in err
    assert ("content/studies/demo.md:12: findings block: claim 2: claims the rung 'registered', but its page's is "
            "'exploratory': a finding takes its study's rung (drop trust:)") in err
    assert "content/home.md:6: findings block: claim 1: study 'studies/nope.md' names no page under content/" in err


def test_a_home_finding_links_its_study_and_takes_its_rung(site, monkeypatch):
    _study_site(site, monkeypatch)
    write_page(site, "studies/demo.md", "## Result\n\nText.\n", STUDY_FRONT.replace("title: Demo study\n",
                                                                                 "title: Demo study\nnav_title: Demo\n"))
    (site / "content/index.md").write_text((site / "content/index.md").read_text() +
        "\n```findings\ntitle: Found so far\nclaims:\n  - text: It is {{ data/golden.json:3 }}.\n"
        "    claim: causal\n    study: studies/demo.md\n```\n")
    assert run(site) == 0
    home = (site / "public/index.html").read_text()
    box = home[home.index('<section class="findings"'):]
    assert ">Found so far<" in box and '<a class="finding-study" href="studies/demo/">Demo</a>' in box
    assert "▮▯▯</span> exploratory" in box


def test_a_finding_takes_its_rung_and_claim_kind_from_its_study_never_its_own(site, capsys, monkeypatch):
    """Issue 28, item 4: on the home page a finding without `study:` typed its own `trust:` and
    `claim:`, and the organism's exploratory rho was published as "causal, registered"."""
    _study_site(site, monkeypatch)
    write_page(site, "studies/demo.md", "## Result\n\nText.\n", STUDY_FRONT)
    write_page(site, "studies/seen.md", "## Result\n\nText.\n",
               STUDY_FRONT.replace("title: Demo study", "title: Seen").replace("claim: observational vs causal",
                                                                              "claim: observational"))
    (site / "bundles/other").mkdir()
    (site / "bundles/other/golden.json").write_text('{\n  "study": "other",\n  "mean_rho": 0.9\n}\n')
    claims = [
        # 1: no study: it typed its own rung and kind
        "  - text: The rho is {{ bundles/demo/golden.json#mean_rho }}.\n    claim: causal\n    trust: registered\n",
        # 2: a rung its study does not have
        "  - text: The rho is {{ bundles/demo/golden.json#mean_rho }}.\n    claim: observational vs causal\n"
        "    trust: registered\n    study: studies/demo.md\n",
        # 3: a rank correlation is not causal
        "  - text: The rho is {{ bundles/demo/golden.json#mean_rho }}.\n    claim: causal\n    study: studies/demo.md\n",
        # 4: another study's value, under this study's name
        "  - text: The rho is {{ bundles/other/golden.json#mean_rho }}.\n    claim: observational vs causal\n"
        "    study: studies/demo.md\n",
        # 5: a kind its study's claim does not allow
        "  - text: It is {{ data/golden.json:3 }}.\n    claim: causal\n    study: studies/seen.md\n",
        # 6: as it should be: the rung typed is its study's, the kind its value's
        "  - text: The rho is {{ bundles/demo/golden.json#mean_rho }}.\n    claim: observational vs causal\n"
        "    trust: exploratory\n    study: studies/demo.md\n",
    ]
    write_page(site, "home.md", "```findings\nclaims:\n" + "".join(claims) + "```\n", "title: Home\nsummary: S.\n")
    assert run(site) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "content/home.md" in line]
    at = "error: content/home.md:6: findings block: claim"
    assert err == [
        f"{at} 1: names no study: off a study page a finding says which study it comes from "
        "(study: studies/NAME.md), whose rung and claim kind it takes",
        f"{at} 2: claims the rung 'registered', but its study's is 'exploratory': a finding takes its study's rung "
        "(drop trust:)",
        f"{at} 4: quotes bundles/other/golden.json, which is not its study's bundle (bundles/demo/): a finding's "
        "rung and claim come from its study, so it quotes that study's values",
        f"{at} 5: a causal finding from a study whose claim is 'observational'",
        f"{at} 1: claim 'causal' is not what its values support: together they make it 'observational vs causal'",
        f"{at} 3: claim 'causal' is not what its values support: together they make it 'observational vs causal'",
    ], err


def test_a_study_says_why_its_rung_is_what_it_is(site, capsys, monkeypatch):
    """Issue 27 item 3: a rung with its reason shown. `trust_reason` prints beside the rung chip
    in the study header, and the number rule reads it like the other prose fields."""
    _study_site(site, monkeypatch)
    front = STUDY_FRONT + "trust_reason: a null result whose test could not pass where the effect was real\n"
    write_page(site, "studies/demo.md", "## Result\n\nText.\n", front)
    assert run(site) == 0
    html = (site / "public/studies/demo/index.html").read_text()
    header = html[html.index('<dl class="study-facts">'):html.index("</dl>")]
    assert re.search(r'<dt>trust</dt>\s*<dd[^>]*><span class="chip trust[^"]*"[^>]*>.*?</span> '
                     r'<span class="trust-reason">a null result whose test could not pass where the effect was '
                     r'real</span></dd>', header, re.S), header
    write_page(site, "studies/demo.md", "## Result\n\nText.\n", STUDY_FRONT + "trust_reason: it missed by 0.25\n")
    assert run(site) == 1
    assert "0.25" in capsys.readouterr().err
