"""Stage 4, build the bundles: each study page's `bundles/<study>/` becomes a deterministic zip
whose own check is run (site_src/bundles.py); the bundle is attached to its page."""
from __future__ import annotations

from .. import bundles as bundle_kit
from ..errors import BuildError
from .model import Bundled, RenderedSite


def build_bundles(rendered: RenderedSite) -> Bundled:
    site = rendered.numbered.site
    built: dict = {}
    for output in rendered.outputs:
        page = output.page
        name = page.meta.get("bundle")
        if page.is_study and isinstance(name, str) and site.files.listed(f"bundles/{name}")[0]:
            output.bundle = _bundle(site, page, name, built, rendered.numbered.memo)
    return Bundled(rendered, built)


def _bundle(site, page, name: str, built: dict, memo):
    if name in built:
        return built[name]
    if site.files.refusal("templates/partials/bundle.html"):
        site.errors.add(BuildError("study pages need templates/partials/bundle.html", page.field_where("bundle")))
        return None
    members = [rel[len(f"bundles/{name}/"):] for rel in site.files.listed(f"bundles/{name}")[0]]
    try:
        def make():
            return bundle_kit.build_bundle(site.files.root / "bundles" / name, site.files.root, members=members)
        built[name] = memo.bundle(name, members, make)   # reused while its files and the generator are unchanged
    except Exception as exc:  # BundleError names the bundle and file; anything else is reported here too
        site.errors.add(BuildError(f"bundle {name!r}: {exc}", page.field_where("bundle")))
        return None
    return built[name]
