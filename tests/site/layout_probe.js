// The layout check's probe (tests/site/test_layout.py), run by the browser suite's visits
// (tests/site/conftest.py) on every page, at each width, in the light and the dark theme.
// One pass over the page; returns every problem it finds (at most a few of each kind) and its height.
(limits) => {
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
}
