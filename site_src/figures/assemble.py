"""Turn a kind's FigureParts into the figure body: static SVGs, interactive hook, text alternative."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import secrets
from html import escape

from . import render
from .data import size_option
from .themed import spec_patch, themed_svg
from .theme import PALETTES, THEMES, vega_config
from .types import Drawing, FigureContext, FigureParts, RenderedFigure, Table

TABLE_ROWS = 100  # the <details> table shows at most this many rows; the CSV has them all (page weight)


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
        vls = []
        for theme in THEMES:
            chart = parts.chart(PALETTES[theme])
            # Altair checks a spec against the Vega-Lite schema, a tenth of a cold build; the
            # dark spec is the light one with other colours, so checking the light one suffices
            vl = chart.to_dict(validate=theme == THEMES[0])
            vl["datasets"] = {**vl.get("datasets", {}), **parts.datasets}
            vl["config"] = _merge(vega_config(PALETTES[theme]), vl.get("config", {}))
            vl["description"] = parts.alt
            vls.append(vl)
        job = render.start_draws(vls, ctx.cache_dir)   # handed to the worker processes now
        out.append(_controls(dom_id, parts))
        drawing = Drawing(f"<!--figure-drawing:{_NONCE}:{figure_id}-->",
                          render.later(lambda: _drawn(render.finish_draws(job), dom_id, figure_id, parts.alt, prefix)))
        out.append(drawing.token)
    if parts.html:
        out.append(parts.html)
    out.append(_table_html(dom_id, parts.table, size_option({"id": figure_id, "options": opts}, "table_rows", TABLE_ROWS, 1, 100_000)))
    out.append(f'<p class="fig-download"><a href="{escape(prefix + csv_name)}" download>'
               f"Download the data (CSV, {len(parts.table.rows)} rows)</a></p>")
    out.append("</div>")
    figure = RenderedFigure(body_html="\n".join(out), files=files, marks=parts.marks, sources=list(parts.sources),
                            drawing=drawing)
    return figure if deferred else figure.complete()


# an HTML comment no page can forge (raw-HTML pages could write one): it is unknown until the build runs
_NONCE = secrets.token_hex(8)


def _drawn(drawn: list, dom_id: str, figure_id: str, alt: str, prefix: str) -> tuple[str, dict]:
    """The static drawing and the live view's hook, from the two drawings (light, dark)."""
    drawn = dict(zip(THEMES, drawn))
    specs = {theme: vg for theme, (vg, _) in drawn.items()}
    svgs = {theme: svg for theme, (_, svg) in drawn.items()}
    out = [f'<div class="fig-static" role="img" aria-label="{escape(alt)}">']
    # one SVG whose colours follow the theme (site_src/figures/themed.py); both if that fails
    one = themed_svg(svgs["light"], svgs["dark"], f"{dom_id}-body")
    if one is not None:
        out.append(render.inline_svg(one, f"{dom_id}-svg", "fig-svg fig-svg-themed"))
    else:
        for theme in THEMES:
            out.append(render.inline_svg(svgs[theme], f"{dom_id}-{theme}", f"fig-svg fig-svg-{theme}"))
    out.append("</div>")
    # the live view's spec is a file of its own, fetched when a reader first interacts
    spec_bytes = _payload(specs).encode("utf-8")
    spec_name = f"figures/{figure_id}-{hashlib.sha256(spec_bytes).hexdigest()[:10]}.json"
    out.append(f'<div class="fig-live" hidden data-figure-spec="{escape(prefix + spec_name)}"></div>')
    return "\n".join(out), {f"assets/{spec_name}": spec_bytes}


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


def _table_html(dom_id: str, table: Table, limit: int) -> str:
    shown = table.rows[:limit]
    note = "" if len(shown) == len(table.rows) else f", first {len(shown)} shown"
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(_cell(v))}</td>" for v in row) + "</tr>" for row in shown)
    return (f'<details class="fig-data"><summary>Data table ({len(table.rows)} rows{note})</summary>'
            f'<div class="fig-table-wrap" role="region" aria-label="Data of this figure" tabindex="0">'
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div></details>")
