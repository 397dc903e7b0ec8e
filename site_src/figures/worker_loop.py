"""The second vl-convert process (site_src/figures/worker.py starts it): reads one JSON request
per line on stdin, writes one JSON answer per line on stdout, until stdin closes.

It imports nothing of the generator (it runs with `python -I`), only vl-convert: a request is
the arguments of one vl-convert call, and an answer its result or its error.
"""
import base64
import json
import sys

import vl_convert


def answer(request: dict):
    op = request["op"]
    if op == "draw":   # Vega-Lite -> (Vega, SVG)
        vega = vl_convert.vegalite_to_vega(request["spec"], vl_version=request["vl_version"])
        vega.pop("$schema", None)
        return {"vega": vega, "svg": vl_convert.vega_to_svg(vega, allowed_base_urls=[])}
    if op == "png":   # Vega -> PNG bytes, as base64 text
        png = vl_convert.vega_to_png(request["spec"], scale=request["scale"], allowed_base_urls=[])
        return base64.b64encode(png).decode("ascii")
    if op == "bundle":
        return vl_convert.javascript_bundle(snippet=request["snippet"], vl_version=request["vl_version"])
    if op == "version":
        return vl_convert.__version__
    raise ValueError(f"unknown request {op!r}")


def main() -> None:
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
