"""The Content-Security-Policy every page carries, in a <meta> tag at the top of its <head>
(templates/base.html), and the one inline script that policy allows.

The site is static, so the policy cannot come in a response header; a meta tag is what every host
serves. It confines what a page, and a study bundle's code run by "Run the check here", may reach
to the site itself: scripts, connections (fetch, XMLHttpRequest, WebSocket, EventSource), workers,
images, fonts and styles come from the page's own origin, and a page cannot be a form's target
elsewhere or change its base URL. check.js starts the bundle's worker from a blob: URL, the one
kind of worker that takes this policy from its page (a worker loaded from its own URL takes the
policy of its response's headers, which a static host does not send).

What the site itself needs, and no more:
- 'unsafe-eval': the Vega runtime compiles each chart's expressions with `Function`; it also lets
  WebAssembly compile (Pyodide for the check, Pagefind for search), so the narrower
  'wasm-unsafe-eval' would add nothing (and the Nu HTML checker refuses it as unknown);
- 'unsafe-inline' styles: each figure's themed <style> and the table cells' alignment attributes;
- blob: workers: the check's worker, as above;
- one inline script, the stored theme applied before the first paint, allowed by its sha256.
"""
from __future__ import annotations

import base64
import hashlib

from markupsafe import Markup

# The stored theme, applied before the first paint (templates/partials/reader_head.html); site.js
# keeps it in step with the switch.
THEME_SCRIPT = ('try{var t=localStorage.getItem("theme");if(t==="light"||t==="dark")'
                'document.documentElement.setAttribute("data-theme",t)}catch(e){}')


def script_hash(text: str) -> str:
    """The CSP source that allows an inline <script> whose text is exactly `text`."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


DIRECTIVES = (
    ("default-src", "'self'"),
    ("script-src", f"'self' {script_hash(THEME_SCRIPT)} 'unsafe-eval'"),
    ("style-src", "'self' 'unsafe-inline'"),
    ("img-src", "'self'"),
    ("font-src", "'self'"),
    ("connect-src", "'self'"),
    ("worker-src", "'self' blob:"),
    ("object-src", "'none'"),
    ("base-uri", "'none'"),
    ("form-action", "'self'"),
)
POLICY = "; ".join(f"{name} {value}" for name, value in DIRECTIVES)


def template_globals() -> dict:
    """What templates/base.html and partials/reader_head.html read: the policy and the script."""
    return {"csp_policy": POLICY, "theme_script": Markup(THEME_SCRIPT)}
