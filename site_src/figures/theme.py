"""Light and dark palettes, the sizes a drawing may have, and the Vega-Lite config built from them.

Backgrounds are explicit (not transparent) so that text contrast holds whatever the page behind.
Colours were picked for >= 4.5:1 text contrast, >= 3:1 for marks and legend symbols against the
background (WCAG 1.4.11), and distinguishable signs under common colour blindness (blue vs
orange, not red vs green).

Sizes (docs/figures.md, "Charts for the width they are shown at"): a drawing is shown at its own
width, or shrunk to fit the column. The narrowest column the site is checked at is a 390 px phone's,
PHONE_COLUMN wide; all chart text is FONT_SIZE, so a drawing at most MAX_WIDTH wide keeps its text
at MIN_TEXT or more there (14 x 358 / 440 = 11.4). A drawing wider than that scrolls in its own box
instead of shrinking (`FigureParts.scroll`); `assemble.check_text_size` enforces both.
"""
from __future__ import annotations

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"  # local fonts only, never fetched
FONT_SIZE = 14          # every text of a chart: labels, titles, legends, marks
PHONE_COLUMN = 358      # the content column of a 390 px phone (1 rem of padding each side)
DESKTOP_COLUMN = 800    # the content column at 1280 px (52 rem less the padding)
MIN_TEXT = 11           # no chart text under this, in CSS px, as shown at either width
MAX_WIDTH = 440         # the widest drawing that may shrink to PHONE_COLUMN: 14 x 358 / 440 >= 11

PALETTES = {
    "light": {
        "name": "light",
        "background": "#ffffff",
        "text": "#1f2328",
        "muted": "#57606a",
        "grid": "#e1e4e8",
        "positive": "#1f5fa8",
        "negative": "#b8560b",
        "accent": "#1f5fa8",
        "accent2": "#b8560b",
        "reference": "#57606a",
        "kinds": ["#1f5fa8", "#b8560b", "#2e7d32", "#7b3fa0", "#57606a"],
        "layer_scheme": {"name": "viridis", "extent": [0, 0.85]},
        "heat_scheme": "blueorange",
    },
    "dark": {
        "name": "dark",
        "background": "#16181d",
        "text": "#e6edf3",
        "muted": "#9da7b3",
        "grid": "#30363d",
        "positive": "#6cb6ff",
        "negative": "#f0883e",
        "accent": "#6cb6ff",
        "accent2": "#f0883e",
        "reference": "#9da7b3",
        "kinds": ["#6cb6ff", "#f0883e", "#7ee787", "#d2a8ff", "#9da7b3"],
        "layer_scheme": {"name": "plasma", "extent": [0.35, 1]},
        "heat_scheme": "blueorange",
    },
}

THEMES = ("light", "dark")


def vega_config(palette: dict) -> dict:
    """The Vega-Lite config of one palette: colours, fonts, axes and grid."""
    text, muted, grid = palette["text"], palette["muted"], palette["grid"]
    size = FONT_SIZE
    return {
        "background": palette["background"],
        "font": FONT,
        # room for text that a browser's font draws wider than vl-convert measured it
        "padding": {"left": 12, "right": 12, "top": 6, "bottom": 6},
        "view": {"stroke": grid},
        "mark": {"color": palette["accent"]},
        "axis": {
            "domainColor": muted, "tickColor": muted, "gridColor": grid,
            "labelColor": text, "titleColor": text, "labelFontSize": size, "titleFontSize": size,
            "titleFontWeight": "normal",
        },
        "legend": {"labelColor": text, "titleColor": text, "labelFontSize": size, "titleFontSize": size,
                   "titleFontWeight": "normal", "labelLimit": 260,
                   # a shape legend draws its symbols in the text colour (not Vega's default grey,
                   # which vanished on the dark background); a colour ramp gets an outline
                   "symbolStrokeColor": text, "symbolFillColor": text, "symbolStrokeWidth": 1.5,
                   "gradientStrokeColor": text, "gradientStrokeWidth": 1},
        "header": {"labelColor": text, "titleColor": text, "labelFontSize": size, "titleFontSize": size},
        "title": {"color": text, "fontSize": size, "subtitleFontSize": size, "subtitleColor": muted,
                  "anchor": "start", "fontWeight": "bold"},
        "text": {"color": text, "fontSize": size},
        "range": {"category": palette["kinds"]},
    }
