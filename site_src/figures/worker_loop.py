"""A vl-convert worker process (site_src/figures/worker.py starts it): reads one JSON request
per line on stdin, writes one JSON answer per line on stdout, until stdin closes.

It imports nothing of the generator (it runs with `python -I`) but vl_calls.py beside it: a
request names one of its calls and gives the arguments, an answer is the result or the error.
"""
import base64
import json
import os
import sys

import vl_convert

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # `-I` leaves this folder out
import vl_calls  # noqa: E402


def answer(request: dict):
    """The answer to one request (draw, draw_pair, png or bundle), as JSON-ready values."""
    op = request["op"]
    if op == "draw":   # Vega-Lite -> (Vega, SVG)
        vega, svg = vl_calls.draw(request["spec"], request["vl_version"])
        return {"vega": vega, "svg": svg}
    if op == "draw_pair":   # a figure's light and dark Vega-Lite -> [[Vega, SVG], [Vega, SVG]]
        return vl_calls.draw_pair(request["light"], request["dark"], request["vl_version"], request["colours"])
    if op == "png":   # Vega -> PNG bytes, as base64 text
        return base64.b64encode(vl_calls.png(request["spec"], request["scale"])).decode("ascii")
    if op == "bundle":
        return vl_calls.bundle(request["snippet"], request["vl_version"])
    if op == "version":
        return vl_convert.__version__
    raise ValueError(f"unknown request {op!r}")


def main() -> None:
    """Answer requests from stdin, one JSON line each, until stdin closes."""
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"id": request["id"], "ok": True, "result": answer(request)}
        except Exception as exc:  # the caller draws it itself, and reports its own error
            reply = {"id": request["id"], "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
