"""Turn a kind's FigureParts into the figure body: static SVGs, interactive hook, text alternative."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import secrets
from html import escape

from . import render
from .data import size_option
from .themed import spec_patch, themed_svg
from .theme import MIN_TEXT, PALETTES, PHONE_COLUMN, THEMES, vega_config
from .types import Drawing, FigureContext, FigureError, FigureParts, RenderedFigure, Table

TABLE_ROWS = 100  # the <details> table shows at most this many rows; the CSV has them all (page weight)
# Page weight (every page within 200 kB before interaction, benchmarks/benchmark_pages.py): a drawing
# larger than this is a file of its own, which figures.js puts in place when the figure comes near
# the viewport, and a data table's rows past INLINE_ROWS are a file the loader adds when the table
# is opened. What the page itself holds is unchanged in kind: the text alternative (the summary
# label, the table's first rows, the CSV with every row) never leaves it.
SVG_INLINE_MAX = 4_000     # bytes
INLINE_ROWS = 20


def assemble(kind: str, figure_id: str, parts: FigureParts, ctx: FigureContext, opts: dict,
             deferred: bool = False) -> RenderedFigure:
    """The figure's body and files. With `deferred`, the drawing (SVG and the live view's spec)
    is finished on the drawing thread: the body holds a token for it and `drawing` says which
    (RenderedFigure.complete puts it in); the bytes are the same either way."""
    dom_id = f"fig-{figure_id}"
    csv_bytes = table_csv(parts.table)
    csv_name = f"figures/{figure_id}-{hashlib.sha256(csv_bytes).hexdigest()[:10]}.csv"
    prefix = ctx.asset_prefix if ctx.asset_prefix.endswith("/") or not ctx.asset_prefix else ctx.asset_prefix + "/"
    files = {f"assets/{csv_name}": csv_bytes}
    out = [f'<div class="fig" id="{dom_id}-body" data-figure-kind="{escape(kind)}" data-figure-id="{escape(figure_id)}"'
           f' data-figure-marks="{parts.marks}">']
    drawing = None
    if parts.chart is not None:
        vls = _vega_lite(parts)
        panels = len(vls) // len(THEMES)
        job = render.start_draws(vls, ctx.cache_dir, themed=True)   # handed to the worker processes now
        out.append(_controls(dom_id, parts))
        if panels == 1:
            finish = lambda: _drawn(render.finish_draws(job), dom_id, figure_id, parts, prefix)
        else:
            finish = lambda: _drawn_panels(render.finish_draws(job), panels, dom_id, figure_id, parts, prefix)
        drawing = Drawing(f"<!--figure-drawing:{_NONCE}:{figure_id}-->", render.later(finish))
        out.append(drawing.token)
    if parts.html:
        out.append(parts.html)
    # the text alternative: the data table and its CSV, collapsed under one line
    download = (f'<p class="fig-download"><a href="{escape(prefix + csv_name)}" download>'
                f"Download the data (CSV, {len(parts.table.rows)} rows)</a></p>")
    table, more = _table_html(dom_id, parts.table, size_option({"id": figure_id, "options": opts}, "table_rows", TABLE_ROWS, 1, 100_000),
                              download, figure_id, prefix)
    out.append(table)
    files.update(more)
    out.append("</div>")
    figure = RenderedFigure(body_html="\n".join(out), files=files, marks=parts.marks, sources=list(parts.sources),
                            drawing=drawing)
    return figure if deferred else figure.complete()


def _vega_lite(parts: FigureParts) -> list[dict]:
    """The Vega-Lite specs of a figure: (light, dark) of each panel, in order, data and theme in place.

    Altair checks every object it makes and every spec it writes against the Vega-Lite schema
    (its "debug mode"): a third of a cold build. A kind's specs differ from build to build only in
    their data, so each kind is checked once, in tests/figures/test_schema.py, and never here.
    The chart is made once, with a palette of placeholders, and each theme's colours are put in
    its dict: the two themes' specs differ only in those values, and making Altair objects is most
    of what is left of a figure's cost."""
    from altair.utils.schemapi import debug_mode   # Altair is imported by the kind's module anyway

    with debug_mode(False):
        charts = parts.chart(_PLACEHOLDERS)
        drafts = [chart.to_dict(validate=False) for chart in (charts if isinstance(charts, list) else [charts])]
    vls = []
    for theme in THEMES:
        palette = PALETTES[theme]
        for draft in drafts:
            vl = _with_palette(draft, palette)
            vl["datasets"] = {**vl.get("datasets", {}), **parts.datasets}
            vl["config"] = _merge(vega_config(palette), vl.get("config", {}))
            vl["description"] = parts.alt
            vls.append(vl)
    return vls


# a character no chart text holds (Unicode's private use area) marks a palette placeholder
_MARK = "\ue000"


def _placeholder(key, value):
    if isinstance(value, list):
        return [f"{_MARK}{key}{_MARK}{i}{_MARK}" for i in range(len(value))]
    return f"{_MARK}{key}{_MARK}"


_PLACEHOLDERS = {key: _placeholder(key, value) for key, value in PALETTES["light"].items()}


def _with_palette(obj, palette: dict):
    """A copy of a chart's dict with each placeholder replaced by the palette's value."""
    if isinstance(obj, dict):
        return {key: _with_palette(value, palette) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_with_palette(value, palette) for value in obj]
    if isinstance(obj, str) and _MARK in obj:
        key, *index = obj.strip(_MARK).split(_MARK)
        if not obj.startswith(_MARK) or not obj.endswith(_MARK) or key not in palette:
            raise ValueError(f"a palette value was used inside a string ({obj!r}): a chart may use "
                             f"palette values only whole, as colours or schemes")
        return palette[key][int(index[0])] if index else palette[key]
    return obj


# an HTML comment no page can forge (raw-HTML pages could write one): it is unknown until the build runs
_NONCE = secrets.token_hex(8)


_SVG_WIDTH = re.compile(r'<svg[^>]*?\swidth="([\d.]+)"')
_FONT_SIZE = re.compile(r'font-size="([\d.]+)px"')


def check_text_size(svg: str, figure_id: str, scroll: bool) -> None:
    """Refuse a drawing whose text would show under theme.MIN_TEXT px: one that shrinks to the
    phone's column (PHONE_COLUMN) scales its text by column / width; one that scrolls does not."""
    match = _SVG_WIDTH.search(svg)
    sizes = [float(x) for x in _FONT_SIZE.findall(svg)]
    if not match or not sizes:
        return
    width, smallest = float(match.group(1)), min(sizes)
    shown = smallest if scroll else smallest * min(1.0, PHONE_COLUMN / width)
    if shown < MIN_TEXT - 0.05:
        how = "its own size" if scroll else f"{PHONE_COLUMN} px, the column of a 390 px phone"
        raise FigureError(figure_id, f"drawn {width:g} px wide with {smallest:g} px text, which shows at {shown:.1f} px"
                                     f" at {how}; charts need {MIN_TEXT} px or more: make it narrower (at most"
                                     f" theme.MAX_WIDTH), or split it into panels (docs/figures.md)")


def _themed(svgs: dict, scope: str, svg_id: str) -> list[str]:
    """One SVG whose colours follow the theme (site_src/figures/themed.py); both if that fails."""
    one = themed_svg(svgs["light"], svgs["dark"], scope)
    if one is not None:
        return [render.inline_svg(one, svg_id, "fig-svg fig-svg-themed")]
    return [render.inline_svg(svgs[theme], f"{svg_id}-{theme}", f"fig-svg fig-svg-{theme}") for theme in THEMES]


_SIZE = re.compile(r'<svg[^>]*?\swidth="([\d.]+)"[^>]*?\sheight="([\d.]+)"')


def _placed(svgs: list[str], name: str, prefix: str, files: dict) -> list[str]:
    """The drawings as the page holds them: a small one inline; a large one as the file
    `assets/figures/NAME-HASH.svg` (the same SVG, standalone), named by a slot that figures.js
    fills with it when the figure nears the viewport (the same markup as inline, so the theme and
    the live view work as before), with an image of it for a reader without scripts. The slot
    carries the drawing's size, so the page does not jump when it arrives."""
    out = []
    for i, svg in enumerate(svgs):
        if len(svg.encode("utf-8")) <= SVG_INLINE_MAX:
            out.append(svg)
            continue
        data = svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1).encode("utf-8")
        part = name if len(svgs) == 1 else f"{name}-{i + 1}"
        file = f"figures/{part}-{hashlib.sha256(data).hexdigest()[:10]}.svg"
        files[f"assets/{file}"] = data
        width, height = _SIZE.search(svg).groups()
        url = escape(prefix + file)
        shown = " fig-svg-light" if "fig-svg-light" in svg.split(">", 1)[0] else (
            " fig-svg-dark" if "fig-svg-dark" in svg.split(">", 1)[0] else "")
        out.append(f'<div class="fig-svg-slot{shown}" data-figure-svg="{url}" data-width="{width}" data-height="{height}">'
                   f'<noscript><img src="{url}" alt="" width="{math.ceil(float(width))}" height="{math.ceil(float(height))}"'
                   f' loading="lazy"></noscript></div>')
    return out


def _static_open(dom_id: str, parts: FigureParts, extra: str = "") -> str:
    """The static drawing's box: an image; one that scrolls is also a named, focusable region."""
    label = escape(parts.alt)
    if parts.scroll:
        return (f'<div class="fig-static fig-scroll{extra}" role="region" tabindex="0" aria-label="{label}">'
                f'<div role="img" aria-label="{label}">')
    return f'<div class="fig-static{extra}" role="img" aria-label="{label}">'


def _drawn_panels(drawn: list, panels: int, dom_id: str, figure_id: str, parts: FigureParts,
                  prefix: str) -> tuple[str, dict]:
    """A multi-panel figure: each panel's drawing in a box of its own, which the page wraps to the
    column. Static only (no live view); its data table and CSV are the figure's whole data."""
    out, files = [_static_open(dom_id, parts, " fig-panels")], {}
    for i in range(panels):
        svgs = {theme: drawn[t * panels + i][1] for t, theme in enumerate(THEMES)}
        check_text_size(svgs["light"], figure_id, parts.scroll)
        scope = f"{dom_id}-p{i + 1}"
        out.append(f'<div class="fig-panel" id="{scope}">')
        out.extend(_placed(_themed(svgs, scope, f"{scope}-svg"), f"{figure_id}-p{i + 1}", prefix, files))
        out.append("</div>")
    out.append("</div></div>" if parts.scroll else "</div>")
    return "\n".join(out), files


def _drawn(drawn: list, dom_id: str, figure_id: str, parts: FigureParts, prefix: str) -> tuple[str, dict]:
    """The static drawing and the live view's hook, from the two drawings (light, dark)."""
    drawn = dict(zip(THEMES, drawn))
    specs = {theme: vg for theme, (vg, _) in drawn.items()}
    svgs = {theme: svg for theme, (_, svg) in drawn.items()}
    check_text_size(svgs["light"], figure_id, parts.scroll)
    out, files = [_static_open(dom_id, parts)], {}
    out.extend(_placed(_themed(svgs, f"{dom_id}-body", f"{dom_id}-svg"), figure_id, prefix, files))
    out.append("</div></div>" if parts.scroll else "</div>")
    # the live view's spec is a file of its own, fetched when a reader first interacts
    spec_bytes = _payload(specs).encode("utf-8")
    spec_name = f"figures/{figure_id}-{hashlib.sha256(spec_bytes).hexdigest()[:10]}.json"
    out.append(f'<div class="fig-live" hidden data-figure-spec="{escape(prefix + spec_name)}"></div>')
    return "\n".join(out), {**files, f"assets/{spec_name}": spec_bytes}


def _merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def _payload(specs: dict) -> str:
    """The light Vega spec with inline data values stored once, and the dark spec as a patch of
    (path, value) changes to it (the full dark spec when the two differ in shape)."""
    data: dict[str, list] = {}
    stripped = {}
    for theme, spec in specs.items():
        spec = json.loads(json.dumps(spec))
        for entry in spec.get("data", []):
            if "values" in entry:
                data.setdefault(entry["name"], entry["values"])
                if data[entry["name"]] != entry["values"]:
                    continue  # differs per theme: leave it inline
                entry["values"] = []
                entry["_shared"] = True
        stripped[theme] = spec
    body = {"data": data, "specs": {"light": stripped["light"]}}
    patch = spec_patch(stripped["light"], stripped["dark"])
    if patch is None:
        body["specs"]["dark"] = stripped["dark"]
    else:
        body["dark_patch"] = patch
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return text


def _controls(dom_id: str, parts: FigureParts) -> str:
    if not parts.controls:
        return ""
    out = ['<div class="fig-controls" hidden>']
    for control in parts.controls:
        cid = f"{dom_id}-{control.signal}"
        out.append(f'<label for="{cid}">{escape(control.label)}</label>')
        out.append(f'<select id="{cid}" data-figure-signal="{escape(control.signal)}">')
        for value, text in control.options:
            selected = " selected" if value == control.value else ""
            out.append(f'<option value="{escape(value)}"{selected}>{escape(text)}</option>')
        out.append("</select>")
    out.append("</div>")
    return "".join(out)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def table_csv(table: Table) -> bytes:
    """The figure's data table as CSV bytes (the download beside the figure)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([_cell(v) for v in row])
    return buffer.getvalue().encode("utf-8")


def _numeric(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    try:
        float(str(value).replace("\u2212", "-"))
        return True
    except ValueError:
        return False


def _table_html(dom_id: str, table: Table, limit: int, download: str, figure_id: str = "",
                prefix: str = "") -> tuple[str, dict]:
    """The data table under its one-line summary, and the file of its rows past INLINE_ROWS (the
    loader adds them when the table is opened: `data-figure-rows`); ({} when it has no more)."""
    shown = table.rows[:limit]
    note = "" if len(shown) == len(table.rows) else f", first {len(shown)} shown"
    # a column of numbers is right-aligned, in tabular figures (site.css's one table layout)
    numeric = [bool(shown) and all(_numeric(row[i]) for row in shown) for i in range(len(table.columns))]
    cls = [' class="num"' if n else "" for n in numeric]
    head = "".join(f'<th scope="col"{cls[i]}>{escape(c)}</th>' for i, c in enumerate(table.columns))
    rows = ["<tr>" + "".join(f"<td{cls[i]}>{escape(_cell(v))}</td>" for i, v in enumerate(row)) + "</tr>" for row in shown]
    later, files, more = "", {}, ""
    if len(rows) > INLINE_ROWS:
        data = "".join(rows[INLINE_ROWS:]).encode("utf-8")
        name = f"figures/{figure_id}-{hashlib.sha256(data).hexdigest()[:10]}.rows.txt"
        files[f"assets/{name}"] = data
        later = f' data-figure-rows="{escape(prefix + name)}"'
        more = (f'<p class="fig-more">The first {INLINE_ROWS} of these {len(rows)} rows are here; the others are added '
                f"when the table is opened, and the CSV has every row.</p>")
        rows = rows[:INLINE_ROWS]
    return (f'<details class="fig-data" data-pagefind-ignore{later}><summary>Data table ({len(table.rows)} rows{note}) and CSV</summary>'
            f'<div class="fig-table-wrap" role="region" aria-label="Data of this figure" tabindex="0">'
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>{more}{download}</details>"), files
