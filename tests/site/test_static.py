"""The built site stands on its own: no URL of another host in any file it serves, a
Content-Security-Policy on every page that keeps it so in the reader's browser, and every figure
readable with JavaScript switched off."""
from __future__ import annotations

import base64
import hashlib
import re

# XML namespace names are identifiers, never fetched.
NAMESPACES = {
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/1999/xlink",
    "http://www.w3.org/2000/xmlns/",
    "http://www.w3.org/1998/Math/MathML",
    "http://www.w3.org/1999/xhtml",
}
# The vendored Vega runtime (Vega alone) names no host but XML namespaces (tests/figures checks
# that), yet its minified code has scheme-like words (`rows:f`, `{http:...}`) this loose pattern
# flags. The browser tests block and count any request that leaves 127.0.0.1, and find none.
# Pagefind's search scripts parse result URLs against the placeholder base https://example.com
# (never requested; the search test runs with other hosts blocked and counted).
# Pyodide's two modules (assets/pyodide/<version>/, "Run the check here") name the jsDelivr CDN as
# the default package base, which check-worker.js replaces by the site's own folder (the published
# lock file lists no package), and ws:// for Node; tests/site/test_browser_check.py runs the check
# on every study with other hosts blocked and counted, and finds none.
VENDORED = {"assets/vega-runtime.js", "pagefind/pagefind.js", "pagefind/pagefind-worker.js"}
VENDORED_FOLDERS = ("assets/pyodide/",)
# Real preference data quotes the web (HH-RLHF dialogues hold URLs people typed): a bundle's JSONL
# rows, served as files and as their source copies, keep those bytes; the pages that show them
# (line views, tables) are HTML and are still checked.
DATA_FOLDERS = ("bundles/", "source/bundles/")
URL = re.compile(r"""(?:https?|wss?|ftp):(?://)?[^\s"'<>)]+|(?:src|href|action)\s*=\s*["']?//[^\s"'<>]+""", re.I)
TEXT = {".html", ".css", ".js", ".mjs", ".json", ".jsonl", ".md", ".txt", ".csv", ".svg", ".xml", ".py", ""}


def test_no_url_of_another_host_in_any_served_file(site_dir):
    offenders = []
    for path in sorted(site_dir.rglob("*")):
        rel = path.relative_to(site_dir).as_posix()
        if not path.is_file() or path.suffix not in TEXT or rel in VENDORED or rel.startswith(VENDORED_FOLDERS):
            continue
        if path.suffix == ".jsonl" and rel.startswith(DATA_FOLDERS):
            continue   # a study's rows, served as files: a browser never reads them as a document
        text = path.read_text("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            for match in URL.findall(line):
                if match.rstrip(".,;") not in NAMESPACES:
                    offenders.append(f"{rel}:{number}: {match[:120]}")
    assert not offenders, "URLs of other hosts in public/:\n" + "\n".join(offenders[:40])


def test_url_check_can_fail():
    assert URL.findall('<script src="https://cdn.example/x.js">') and URL.findall("<img src=//cdn.example/a.png>")


CSP_META = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">')


def test_every_page_carries_a_policy_that_confines_it_to_the_site(site_dir):
    """Every page's first element after its charset is a Content-Security-Policy that lets the page
    (and a study bundle's code, run by "Run the check here") reach the site itself and nothing
    else, and that allows each inline script the page holds, by its hash, and no other."""
    problems = []
    # every document (a figure's lazily loaded rows are a fragment, put into a page that has one)
    pages = [p for p in sorted(site_dir.rglob("*.html")) if p.read_text("utf-8").startswith("<!DOCTYPE html>")]
    assert len(pages) >= 10
    for path in pages:
        rel = path.relative_to(site_dir).as_posix()
        html = path.read_text("utf-8")
        head = html[: html.index("</head>")]
        match = CSP_META.search(head)
        if not match:
            problems.append(f"{rel}: no Content-Security-Policy")
            continue
        first = re.search(r"<(?:script|link|style|img)\b", head)
        if not head.startswith('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n' + match.group(0)) \
                or (first and first.start() < match.start()):
            problems.append(f"{rel}: the policy is not the first thing in <head>")
        policy = dict((d.split(" ", 1) + [""])[:2] for d in match.group(1).replace("&#39;", "'").split("; "))
        for name in ("default-src", "connect-src", "img-src", "font-src"):
            if policy.get(name) != "'self'":
                problems.append(f"{rel}: {name} is {policy.get(name)!r}, not 'self'")
        if policy.get("worker-src") != "'self' blob:" or policy.get("object-src") != "'none'":
            problems.append(f"{rel}: worker-src {policy.get('worker-src')!r}, object-src {policy.get('object-src')!r}")
        scripts = policy.get("script-src", "").split()
        if scripts[:1] != ["'self'"] or any(":" in source or "*" in source for source in scripts):
            problems.append(f"{rel}: script-src {scripts} allows another host")
        allowed = {s for s in scripts if s.startswith("'sha256-")}
        inline = re.findall(r"<script>(.*?)</script>", html, re.S)
        hashed = {"'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'" for code in inline}
        if hashed != allowed:
            problems.append(f"{rel}: inline scripts {sorted(hashed)} but the policy allows {sorted(allowed)}")
    assert not problems, "\n".join(problems[:20])


def test_every_figure_shows_with_javascript_off(browser, base_url, site_dir, kit):
    # with script off the page is its HTML: a page whose HTML has no figure has none to show, so
    # only the pages with one are loaded
    pages = [p for p in kit.built_pages(site_dir) if not p.startswith("source/")
             and "data-figure-kind" in kit.html_file(site_dir, p).read_text("utf-8")]
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    try:
        seen = 0
        problems = []
        for path in pages:
            page = context.new_page()
            page.goto(base_url + path, wait_until="load")
            for index, figure in enumerate(page.locator("[data-figure-kind]").all()):
                kind = figure.get_attribute("data-figure-kind")
                shown = [s for s in figure.locator("svg").all() if s.is_visible()]
                listed = figure.locator("ol, ul, table").count()
                # top lists are HTML, not SVG; every other kind must show a static drawing
                if not shown and not listed:
                    problems.append(f"{path or 'home'}: figure {index} ({kind}) shows nothing with JS off")
                elif shown:
                    box = shown[0].bounding_box()
                    if not box or box["width"] < 50 or box["height"] < 50:
                        problems.append(f"{path or 'home'}: figure {index} ({kind}) SVG is {box}")
                seen += 1
            page.close()
        assert seen, "no figure found on any page"
        assert not problems, "\n".join(problems)
    finally:
        context.close()
