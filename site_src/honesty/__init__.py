"""The honesty checks of a build: preregistrations, trust rungs and claim kinds, errata, and the
reproduction registry. Each module does one job; this one gathers their results for the pages.

The generator calls, once per build:

    honesty = Honesty(root, errors, cache)          # reads registrations/ (and git), lazily
    info = honesty.study(page, bundle)              # per study page: StudyHonesty for its header
    honesty.check_page(page, md, env, rendered)     # rungs and claim kinds of a page and its figures
    files = honesty.pages(render)                   # registrations/ pages; render(template, prefix, **ctx)
    honesty.used                                    # fixtures to publish with a line view

Every problem is added to the build's error list with the file and line an author must edit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BuildError
from ..resolve import Resolver
from . import registrations, reproductions, rungs


@dataclass
class StudyHonesty:
    study: str
    reproductions: list = field(default_factory=list)       # reproductions.Reproduction
    reproduction_line: str = "No independent reproduction recorded"
    registrations: list = field(default_factory=list)       # registrations.Verified of this study
    bundle_sha256: str = ""


class Honesty:
    def __init__(self, root: Path, errors, cache=None, files=None):
        self.root = Path(root).resolve()
        self.errors = errors
        self.resolver = Resolver(self.root, None, cache, files=files)
        # the path policy (site_src.paths.RepoFiles): records are read only when git tracks them
        self.refusal = self.resolver.files.refusal if self.resolver.files is not None else (lambda rel: None)
        self._registrations: list | None = None
        self._machines: set | None = None
        self.studies: dict[str, StudyHonesty] = {}

    @property
    def used(self) -> dict[str, bool]:
        return self.resolver.used

    @property
    def registrations(self) -> list:
        """Every verified registration (the ones that failed a check are build errors instead)."""
        if self._registrations is None:
            self._registrations = registrations.load_all(self.root, self.resolver, self.errors, refusal=self.refusal)
            for verified in self._registrations:
                self.resolver.used[verified.registration.rel] = True
        return self._registrations

    def registered_studies(self) -> set[str]:
        return {v.registration.study for v in self.registrations}

    def study(self, page, bundle) -> StudyHonesty:
        """The honesty facts a study page shows; computed once per study."""
        name = bundle.name
        if name in self.studies:
            return self.studies[name]
        if self._machines is None:
            try:
                self._machines = reproductions.project_machines(self.root)
            except BuildError as exc:
                self.errors.add(exc)
                self._machines = set()
        found = reproductions.load_reproductions(self.root, name, bundle, self.errors, self._machines, self.refusal)
        for rep in found:
            self.resolver.used[rep.rel] = True
        info = StudyHonesty(
            study=name, reproductions=found, reproduction_line=reproductions.reproduction_line(found),
            registrations=[v for v in self.registrations if v.registration.study == name],
            bundle_sha256=getattr(bundle, "sha256", ""))
        self.studies[name] = info
        return info

    def check_page(self, page, md, env, rendered) -> None:
        """Trust rungs and claim kinds of a rendered page and its figures (rungs.py)."""
        rungs.check_page(page, md, env, rendered, self, self.errors)

    def pages(self, render) -> dict[str, bytes]:
        from .site_pages import registration_pages
        return registration_pages(self, render)
