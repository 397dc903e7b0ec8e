"""The vl-convert calls a build makes, one function each, and nothing else: the build's own
process (render.py, preview.py, runtime.py) and the worker processes (worker_loop.py, which runs
with `python -I` and imports this file from its folder) make them through the same code."""
import vl_convert

try:
    from . import recolour
except ImportError:   # a worker process (worker_loop.py) imports this file from its folder
    import recolour


def draw(vl_spec: dict, vl_version: str) -> tuple[dict, str]:
    """Vega-Lite -> (Vega spec without its `$schema`, SVG), fetching nothing."""
    vega = vl_convert.vegalite_to_vega(vl_spec, vl_version=vl_version)
    vega.pop("$schema", None)
    return vega, vl_convert.vega_to_svg(vega, allowed_base_urls=[])


def draw_pair(light: dict, dark: dict, vl_version: str, colours: dict) -> list:
    """[(Vega, SVG) light, (Vega, SVG) dark] of one figure's two themes: both compiled, the light
    drawn, and the dark recoloured from it where recolour.py finds that exact (else drawn)."""
    light_vega, light_svg = draw(light, vl_version)
    dark_vega = vl_convert.vegalite_to_vega(dark, vl_version=vl_version)
    dark_vega.pop("$schema", None)
    svg = recolour.dark_svg(light_vega, dark_vega, light_svg, colours)
    if svg is None:
        svg = vl_convert.vega_to_svg(dark_vega, allowed_base_urls=[])
    return [(light_vega, light_svg), (dark_vega, svg)]


def png(vega_spec: dict, scale: float) -> bytes:
    """A compiled Vega spec drawn as PNG at `scale`, nothing fetched."""
    return vl_convert.vega_to_png(vega_spec, scale=scale, allowed_base_urls=[])


def bundle(snippet: str, vl_version: str) -> str:
    """vl-convert's JavaScript bundle of `snippet` (the offline Vega runtime)."""
    return vl_convert.javascript_bundle(snippet=snippet, vl_version=vl_version)
