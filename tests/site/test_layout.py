"""The layout check: every built page at 390 and 1280 px, in the light and the dark theme, in
Debian's Chromium. One test per page and combination (parametrized in conftest.py), each failing
on any of:

- an element wider than the viewport (or a clipped table cell) outside a scroll region;
- chart text under 11 CSS px as rendered (font size times the drawing's scale on screen);
- a chart's marks or legend symbols under 3:1 contrast against the chart's background (WCAG
  1.4.11, non-text contrast; a mark passes on its fill or its outline);
- a line of prose that begins with punctuation (a number's comma or full stop wrapped away);
- heading levels out of order (one h1, then no level skipped).

Each test reports the page's height in screens as a reader first meets it, collapsed sections
closed (printed at the end of the run, with the folder of the screenshots), saves a screenshot of
the page to test-artifacts/layout/<width>-<theme>/, then opens the collapsed sections and checks
everything with them open.
"""
from __future__ import annotations

import base64

import pytest

VIEWPORT_HEIGHT = {390: 844, 1280: 900}
SCREENSHOT_SCREENS = 20     # a page's screenshot covers at most this many screens
SOURCE_SCREENS = 2          # a fixture's line view (one template, often thousands of lines): its top
MIN_CHART_TEXT = 11.0
MIN_MARK_CONTRAST = 3.0

# One pass over the page; returns every problem it finds (at most a few of each kind) and its height.
PROBE = r"""(limits) => {
  const vw = document.documentElement.clientWidth;
  const out = {overflow: [], small_text: [], low_contrast: [], punctuation: [], headings: [],
               height: document.documentElement.scrollHeight, viewport: window.innerHeight,
               scroll_width: document.documentElement.scrollWidth, vw};
  const name = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += '#' + el.id;
    const cls = typeof el.className === 'string' ? el.className : (el.className && el.className.baseVal) || '';
    if (cls.trim()) s += '.' + cls.trim().split(/\s+/).slice(0, 2).join('.');
    const fig = el.closest && el.closest('figure[id]');
    return fig && fig !== el ? s + ' in ' + fig.id : s;
  };
  const shown = (el) => el.checkVisibility ? el.checkVisibility({opacityProperty: true, visibilityProperty: true}) : true;

  // 1. nothing wider than the viewport, unless inside a box that scrolls (and itself fits); the
  //    walk does not descend into a scroll box, so a long fixture view costs no more than its frame
  if (out.scroll_width > vw + 1) out.overflow.push(`the page scrolls sideways: ${out.scroll_width}px wide in ${vw}px`);
  const boxes = new Set(['auto', 'scroll', 'hidden', 'clip']);
  const visit = (el) => {
    if (out.overflow.length > 8 || el.namespaceURI === 'http://www.w3.org/2000/svg' && el.tagName !== 'svg') return;
    const r = el.getBoundingClientRect();
    const st = getComputedStyle(el);
    if (st.display === 'none') return;
    if ((r.width || r.height) && r.right > vw + 1) out.overflow.push(`${name(el)} reaches ${Math.round(r.right)}px in ${vw}px`);
    const tag = el.tagName.toLowerCase();
    if ((tag === 'td' || tag === 'th') && el.scrollWidth > el.clientWidth + 1 && st.overflowX !== 'visible') {
      out.overflow.push(`${name(el)}: a clipped table cell (${el.scrollWidth}px of content in ${el.clientWidth}px)`);
    }
    if (boxes.has(st.overflowX) && el !== document.body && el !== document.documentElement) return;
    for (const child of el.children) visit(child);
  };
  for (const child of document.body.children) visit(child);

  // 2. chart text at least 11 CSS px as drawn on screen
  for (const t of document.querySelectorAll('.fig svg text')) {
    if (!t.textContent.trim() || !t.getClientRects().length || !shown(t)) continue;
    const m = t.getScreenCTM();
    if (!m) continue;
    const size = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
    if (size < limits.text - 0.05 && out.small_text.length < 8) {
      out.small_text.push(`${name(t.closest('svg'))}: "${t.textContent.trim().slice(0, 30)}" at ${size.toFixed(1)}px`);
    }
  }

  // 3. marks and legend symbols at least 3:1 against the chart's background
  const rgba = (text) => {
    const m = /rgba?\(([^)]+)\)/.exec(text || '');
    if (!m) return null;
    const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const ratio = (x, y) => { const a = lum(x), b = lum(y); return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05); };
  const over = (c, alpha, bg) => ({r: c.r * alpha + bg.r * (1 - alpha), g: c.g * alpha + bg.g * (1 - alpha),
                                   b: c.b * alpha + bg.b * (1 - alpha)});
  const pageBg = rgba(getComputedStyle(document.body).backgroundColor) || {r: 255, g: 255, b: 255, a: 1};
  const opacity = (el, svg) => {
    let o = 1;
    for (let a = el; a && a !== svg.parentElement; a = a.parentElement) o *= parseFloat(getComputedStyle(a).opacity || '1');
    return o;
  };
  for (const svg of document.querySelectorAll('.fig svg')) {
    if (!svg.getClientRects().length || !shown(svg)) continue;
    const back = svg.querySelector(':scope > rect');
    const bg = (back && rgba(getComputedStyle(back).fill)) || pageBg;
    const marks = svg.querySelectorAll('.role-mark :is(path, rect, circle, line, polyline, polygon, ellipse),'
                                     + ' .role-legend-symbol :is(path, rect, circle), .role-legend-gradient :is(path, rect)');
    for (const el of marks) {
      if (!el.getClientRects().length) continue;
      const st = getComputedStyle(el), o = opacity(el, svg);
      let best = 0, seen = false;
      const fill = rgba(st.fill);
      if (fill && st.fill !== 'none' && fill.a > 0 && parseFloat(st.fillOpacity) > 0) {
        seen = true; best = Math.max(best, ratio(over(fill, fill.a * parseFloat(st.fillOpacity) * o, bg), bg));
      }
      const stroke = rgba(st.stroke);
      if (stroke && st.stroke !== 'none' && stroke.a > 0 && parseFloat(st.strokeWidth) > 0 && parseFloat(st.strokeOpacity) > 0) {
        seen = true; best = Math.max(best, ratio(over(stroke, stroke.a * parseFloat(st.strokeOpacity) * o, bg), bg));
      }
      if (/url\(/.test(st.fill)) continue;   // a gradient: judged by its outline when it has one
      if (seen && best < limits.contrast && out.low_contrast.length < 8) {
        const group = el.closest('.role-mark, .role-legend-symbol, .role-legend-gradient');
        out.low_contrast.push(`${name(svg)} ${group ? group.getAttribute('class').split(' ').pop() : ''}: ${st.fill}/${st.stroke} at ${best.toFixed(2)}:1`);
      }
    }
  }

  // 4. no line of prose begins with punctuation (code and math count as the text before it)
  const skip = 'pre, svg, script, style, .math-block, table.lines, [hidden], .ref-tip, details:not([open]) > :not(summary)';
  const inert = 'code, kbd, samp, math';
  const closing = /[,.;:!?)\]}%\u201d\u2019\u00bb]/;
  // skipped subtrees are rejected whole (a fixture view's thousands of lines are never walked)
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
    acceptNode: (n) => n.nodeType === 1 ? (n.matches(skip) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_SKIP)
      : (n.textContent.trim() ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_SKIP)});
  const range = document.createRange();
  const rectOf = (node, i) => { range.setStart(node, i); range.setEnd(node, i + 1); const rs = range.getClientRects(); return rs.length ? rs[0] : null; };
  const block = (n) => n.parentElement.closest('p, li, dd, dt, td, th, figcaption, h1, h2, h3, h4, summary, caption, div');
  let prev = null;   // the last non-space character seen: [node, index]
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent, prose = !node.parentElement.closest(inert);
    for (let i = 0; i < text.length; i++) {
      if (/\s/.test(text[i])) continue;
      if (prose && closing.test(text[i]) && prev && out.punctuation.length < 8 && block(node) === block(prev[0])) {
        const here = rectOf(node, i), before = rectOf(prev[0], prev[1]);
        if (here && before && here.width > 0 && here.top >= before.bottom - 2) {
          const context = (prev[0].textContent.slice(Math.max(0, prev[1] - 12), prev[1] + 1) + ' | ' + text.slice(i, i + 14)).replace(/\s+/g, ' ');
          out.punctuation.push(`${name(node.parentElement)}: a line begins with "${text[i]}" ("${context}")`);
        }
      }
      prev = [node, i];
    }
  }

  // 5. heading levels in order
  const heads = Array.from(document.querySelectorAll('h1, h2, h3, h4, h5, h6')).filter((h) => !h.closest('svg'));
  const h1s = heads.filter((h) => h.tagName === 'H1').length;
  if (h1s !== 1) out.headings.push(`${h1s} h1 elements`);
  if (heads.length && heads[0].tagName !== 'H1') out.headings.push(`the first heading is ${heads[0].tagName.toLowerCase()}`);
  for (let k = 1; k < heads.length; k++) {
    const a = Number(heads[k - 1].tagName[1]), b = Number(heads[k].tagName[1]);
    if (b > a + 1) out.headings.push(`${heads[k - 1].tagName.toLowerCase()} "${heads[k - 1].textContent.trim().slice(0, 40)}"`
                                   + ` is followed by ${heads[k].tagName.toLowerCase()} "${heads[k].textContent.trim().slice(0, 40)}"`);
  }
  return out;
}"""


@pytest.fixture(scope="module")
def contexts(browser):
    """One browser context per (width, theme), shared by the module's tests."""
    made = {}

    def get(width: int, scheme: str):
        if (width, scheme) not in made:
            made[(width, scheme)] = browser.new_context(
                viewport={"width": width, "height": VIEWPORT_HEIGHT[width]}, color_scheme=scheme)
        return made[(width, scheme)]

    yield get
    for context in made.values():
        context.close()


def test_layout(layout_page, site_dir, base_url, contexts, kit):
    width, scheme, path = layout_page
    assert not path.startswith("(build failed"), path
    page = contexts(width, scheme).new_page()
    try:
        page.goto(base_url + path, wait_until="load")
        page.evaluate("document.fonts.ready.then(() => true)")
        # the height a reader first meets: collapsed sections closed
        height = page.evaluate("document.documentElement.scrollHeight")
        screens = height / VIEWPORT_HEIGHT[width]
        kit.record_height((path, width, scheme, height, screens))
        folder = kit.LAYOUT / f"{width}-{scheme}"
        folder.mkdir(parents=True, exist_ok=True)
        shot = folder / f"{kit.slug(path)}.png"
        screens_shot = SOURCE_SCREENS if path.startswith("source/") else SCREENSHOT_SCREENS
        tall = min(height, screens_shot * VIEWPORT_HEIGHT[width])
        # the DevTools call itself: Playwright's full-page screenshot resizes the viewport to the
        # page's height and lays the page out again, several times slower on a long page
        cdp = page.context.new_cdp_session(page)
        data = cdp.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                   "clip": {"x": 0, "y": 0, "width": width, "height": tall, "scale": 1}})
        cdp.detach()
        shot.write_bytes(base64.b64decode(data["data"]))
        # every check, with the collapsed sections open: what they hold must hold the layout too
        page.evaluate(kit.OPEN_SECTIONS)
        found = page.evaluate(PROBE, {"text": MIN_CHART_TEXT, "contrast": MIN_MARK_CONTRAST})
    finally:
        page.close()
    problems = []
    for key, what in (("overflow", "wider than the viewport outside a scroll region"),
                      ("small_text", f"chart text under {MIN_CHART_TEXT:g} px as rendered"),
                      ("low_contrast", f"marks or legend symbols under {MIN_MARK_CONTRAST:g}:1 contrast"),
                      ("punctuation", "lines that begin with punctuation"),
                      ("headings", "heading levels out of order")):
        if found[key]:
            problems.append(f"{what}:\n    " + "\n    ".join(found[key]))
    assert not problems, (f"/{path} at {width} px, {scheme} ({screens:.1f} screens tall; screenshot {shot}):\n  "
                          + "\n  ".join(problems))
