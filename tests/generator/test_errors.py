"""One exception base for the whole generator (site_src/errors.py): every exception site_src raises
on purpose is a BuildError, prints as one `WHERE: MESSAGE` line, and a build reports each problem
(honesty's records included: every bad field of a record, not the first)."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import site_src
from site_src.errors import BuildError, BuildErrors, Errors, FixtureProblem
from site_src.honesty.yamlfile import Record


def _modules():
    for info in pkgutil.walk_packages(site_src.__path__, "site_src."):
        if info.name.endswith("worker_loop"):   # a script run apart (python -I), importing no generator code
            continue
        yield importlib.import_module(info.name)


def test_every_exception_the_generator_defines_is_a_build_error():
    defined = {cls for module in _modules() for _name, cls in inspect.getmembers(module, inspect.isclass)
               if issubclass(cls, BaseException) and cls.__module__ == module.__name__}
    assert len(defined) >= 12, sorted(c.__name__ for c in defined)
    strays = sorted(f"{cls.__module__}.{cls.__name__}" for cls in defined if not issubclass(cls, BuildError))
    assert not strays, f"exceptions outside the one base: {strays}"


def test_every_error_is_one_line_naming_where():
    assert str(BuildError("lacks 'title'", "content/a.md:1")) == "content/a.md:1: lacks 'title'"
    assert str(BuildError("no such key", "content/a.md:9", "data/g.json:4")) == \
        "content/a.md:9: no such key [fixture data/g.json:4]"
    assert str(FixtureProblem("line 99 is out of range", "data/g.json")) == "data/g.json: line 99 is out of range"
    from site_src.figures.types import FigureError
    from site_src.parse import ParseProblem
    assert str(ParseProblem("not valid YAML", 3)) == "line 3: not valid YAML"
    assert str(FigureError("f1", "`data` lacks the key `lens`")) == "figure 'f1': `data` lacks the key `lens`"


def test_a_record_reports_every_bad_field_at_once():
    record = Record("registrations/x.yaml", "", {"id": "x", "colour": 1, "size": 2},
                    {("id",): 1, ("colour",): 2, ("size",): 3})
    errors = Errors()
    try:
        record.check_fields(("id", "claim"), " (known: id, claim)", "")
    except BuildError as exc:   # the record is refused whole, as before
        errors.add(exc)
    assert errors.lines() == ["registrations/x.yaml:2: unknown field 'colour' (known: id, claim)",
                              "registrations/x.yaml:3: unknown field 'size' (known: id, claim)",
                              "registrations/x.yaml:1: lacks 'claim'"]
    assert isinstance(BuildErrors([BuildError("a")]), BuildError)
