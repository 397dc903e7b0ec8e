"""Build errors that name where they happened: the page file and line, and the fixture file and line.

`BuildError` is the one base of every exception site_src raises on purpose (the path policy's
refusals, a parse problem, a fixture problem, a bad reference, a figure, a bundle, the search
index); each says what is wrong and where, and prints as one line, `WHERE: MESSAGE [fixture F]`.
A build collects them in `Errors` and reports them all; it never stops at the first.
"""
from __future__ import annotations


class BuildError(Exception):
    """One problem of a build, and the base of every exception the generator raises on purpose.

    `where` is the place an author must edit (``content/page.md:12``; for a problem found inside
    a text or a figure, ``line 3`` or ``figure 'f1'``); `fixture` is the fixture location the
    problem was found at (``bundles/s/golden.json:9``), when there is one.
    """

    def __init__(self, message: str, where: str = "", fixture: str = ""):
        self.message, self.where, self.fixture = message, where, fixture
        super().__init__(self.format())

    def format(self) -> str:
        """The one line it is printed as: `where: message [fixture F]`."""
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text} [fixture {self.fixture}]" if self.fixture and self.fixture != self.where else text

    def at(self, where: str) -> "BuildError":
        """The same error, placed at `where` unless it already names a place."""
        return self if self.where else BuildError(self.message, where, self.fixture)


def internal_error(exc: BaseException, where: str = "") -> BuildError:
    """An exception nobody expected, as one build error at the place being built: a bug in the
    generator, reported on one line (never a traceback), so the build and `serve` go on."""
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    return BuildError(f"internal error: {type(exc).__name__}: {text} (a bug in the generator; please report it)",
                      where)


class BuildErrors(BuildError):
    """Several problems found together (every unknown and missing field of one record), raised at
    once by code that refuses the whole thing; `Errors.add` keeps each of them, one line each."""

    def __init__(self, problems: list[BuildError]):
        self.problems = list(problems)
        first = self.problems[0]
        super().__init__(first.message, first.where, first.fixture)

    def format(self) -> str:
        """Each problem's line."""
        return "\n".join(problem.format() for problem in self.problems)


class FixtureProblem(BuildError):
    """Raised while reading a fixture, at the fixture's location; the caller adds the page's."""

    def __init__(self, message: str, fixture: str = ""):
        super().__init__(message, fixture, fixture)


class Errors:
    """Collects every error of a build so all of them are reported at once, and its warnings:
    problems an author should fix that do not stop the build (a glossary term used before its
    definition), printed after it."""

    def __init__(self) -> None:
        self.items: list[BuildError] = []
        self.warnings: list[BuildError] = []

    def add(self, error: BuildError) -> None:
        """Keep `error` (each of a BuildErrors' problems); the build goes on."""
        self.items.extend(error.problems if isinstance(error, BuildErrors) else [error])

    def warn(self, warning: BuildError) -> None:
        """Add a warning: printed after the build, which it does not stop."""
        self.warnings.append(warning)

    def warning_lines(self) -> list[str]:
        """Each warning as one WHERE: MESSAGE line."""
        return [w.format() for w in self.warnings]

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def lines(self) -> list[str]:
        """Every error, one line each, in the order found."""
        return [e.format() for e in self.items]
