"""Figure kinds drawn from fixtures with Altair; static SVG at build time, offline Vega runtime."""
