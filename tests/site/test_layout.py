"""The layout check: every built page at 390 and 1280 px, in the light and the dark theme, in
Debian's Chromium. The probe (layout_probe.js) runs on the browser suite's visits (conftest.py:
one load of each page per width, the colour scheme switched on the loaded page for the other
theme), with the collapsed sections open. One test per check, each naming every failing page,
width and theme:

- an element wider than the viewport (or a clipped table cell) outside a scroll region;
- chart text under 11 CSS px as rendered (font size times the drawing's scale on screen);
- a chart's marks or legend symbols under 3:1 contrast against the chart's background (WCAG
  1.4.11, non-text contrast; a mark passes on its fill or its outline);
- a line of prose that begins with punctuation (a number's comma or full stop wrapped away);
- heading levels out of order (one h1, then no level skipped).

The visits record each page's height in screens as a reader first meets it, collapsed sections
closed (printed at the end of the run; a study page must fit 8 screens of 1280 x 800 and 14 of
390 x 844), and save one screenshot of each page per width to
test-artifacts/layout/<width>-<theme>/.
"""
from __future__ import annotations

import pytest

CHECKS = {
    "overflow": "wider than the viewport outside a scroll region",
    "small_text": "chart text under {text:g} px as rendered",
    "low_contrast": "marks or legend symbols under {contrast:g}:1 contrast",
    "punctuation": "lines that begin with punctuation",
    "headings": "heading levels out of order",
}
THEMES = ("light", "dark")


class _Rows(list):
    def __repr__(self):   # a failure prints the message below, not every row
        return f"<the layout of {len(self)} page, width and theme combinations>"


@pytest.fixture(scope="module")
def layouts(desktop_visits, phone_visits, site_dir, kit) -> list[tuple]:
    """(page, width, theme, probe result, screens tall, screenshot) of every built page (the 404
    page aside) at both widths in both themes; fails naming any page a visit did not check."""
    rows, missing = _Rows(), []
    for visits, viewport in ((desktop_visits, kit.DESKTOP), (phone_visits, kit.PHONE)):
        for path in kit.built_pages(site_dir):
            if path == "404.html":
                continue
            visit = visits.get(path)
            for theme in THEMES:
                if visit is None or theme not in visit.layout:
                    missing.append(f"/{path} at {viewport['width']} px, {theme}")
                    continue
                rows.append((path, viewport["width"], theme, visit.layout[theme],
                             visit.heights[theme] / viewport["height"], visit.screenshot))
    assert not missing, "pages the layout check never saw:\n  " + "\n  ".join(missing)
    return rows


@pytest.mark.parametrize("check", list(CHECKS))
def test_layout(check, layouts, kit):
    failing = [f"/{path} at {width} px, {theme} ({screens:.1f} screens tall; screenshot {shot}):\n    "
               + "\n    ".join(found[check])
               for path, width, theme, found, screens, shot in layouts if found[check]]
    what = CHECKS[check].format(**kit.LAYOUT_LIMITS)
    assert not failing, f"{what}, on {len(failing)} page(s):\n  " + "\n  ".join(failing)


# A study page (studies/<name>/, not its detail or provenance pages) fits this many screens as a
# reader first meets it: 1280 x 800 on a laptop, 390 x 844 on a phone (issue 27).
STUDY_SCREENS = {1280: (800, 8.0), 390: (844, 14.0)}


def test_a_study_page_fits_its_screens(layouts, kit):
    viewports = {kit.DESKTOP["width"]: kit.DESKTOP["height"], kit.PHONE["width"]: kit.PHONE["height"]}
    studies = [row for row in layouts if row[0].startswith("studies/") and row[0].count("/") == 2 and row[0].endswith("/")]
    assert studies, "no study page was laid out"
    over = []
    for path, width, theme, _found, screens, _shot in studies:
        screen, most = STUDY_SCREENS[width]
        tall = screens * viewports[width] / screen
        if tall > most:
            over.append(f"/{path} at {width} px, {theme}: {tall:.1f} screens of {screen} px (at most {most:g})")
    assert not over, "study pages too long:\n  " + "\n  ".join(over)


# What the visits rest on: the other theme is the colour scheme switched on the loaded page. On a
# study page (figures, tables, chips), the switched page must be the page loaded in that theme.
THEME_PRINT = """() => ({body: getComputedStyle(document.body).backgroundColor,
    text: getComputedStyle(document.body).color,
    marks: Array.from(document.querySelectorAll('.fig svg .role-mark :is(path, rect, circle)')).slice(0, 12)
        .map(e => getComputedStyle(e).fill + ' ' + getComputedStyle(e).stroke),
    height: document.documentElement.scrollHeight})"""


def test_switching_the_scheme_on_a_loaded_page_is_that_theme_loaded(browser, base_url, site_dir, kit):
    pages = [p for p in kit.built_pages(site_dir) if p.startswith("studies/") and p.endswith("/")
             and "data-figure-kind" in kit.html_file(site_dir, p).read_text("utf-8")]
    assert pages, "no study page with a figure"
    path, seen = pages[0], {}
    for start, scheme in (("light", "dark"), ("dark", "dark"), ("light", "light")):
        context = browser.new_context(viewport=kit.PHONE, color_scheme=start)
        try:
            page = context.new_page()
            page.goto(base_url + path, wait_until="load")
            page.evaluate("document.fonts.ready.then(() => true)")
            page.emulate_media(color_scheme=scheme)
            page.evaluate(kit.OPEN_SECTIONS)
            page.evaluate(kit.PLACE_DRAWINGS)   # drawings over 4 kB load lazily: put them in first
            seen[(start, scheme)] = (page.evaluate(THEME_PRINT), page.evaluate(kit.LAYOUT_PROBE, kit.LAYOUT_LIMITS))
        finally:
            context.close()
    switched, loaded, light = seen[("light", "dark")], seen[("dark", "dark")], seen[("light", "light")]
    assert switched[0]["marks"] and switched[0] != light[0], f"/{path}: the dark theme looks like the light one"
    assert switched == loaded, f"/{path}: switched to dark {switched[0]}, loaded dark {loaded[0]}"
