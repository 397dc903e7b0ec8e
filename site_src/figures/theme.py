"""Light and dark palettes and the Vega-Lite config built from them.

Backgrounds are explicit (not transparent) so that text contrast holds whatever the page behind.
Colours were picked for >= 4.5:1 text contrast and distinguishable signs under common colour
blindness (blue vs orange, not red vs green).
"""
from __future__ import annotations

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"  # local fonts only, never fetched

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
    return {
        "background": palette["background"],
        "font": FONT,
        "view": {"stroke": grid},
        "axis": {
            "domainColor": muted, "tickColor": muted, "gridColor": grid,
            "labelColor": text, "titleColor": text, "labelFontSize": 11, "titleFontSize": 12,
        },
        "legend": {"labelColor": text, "titleColor": text, "labelFontSize": 11},
        "header": {"labelColor": text, "titleColor": text, "labelFontSize": 12},
        "title": {"color": text},
        "text": {"color": text},
        "range": {"category": palette["kinds"]},
    }
