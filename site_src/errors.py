"""Build errors that name where they happened: the page file and line, and the fixture file and line."""
from __future__ import annotations


class BuildError(Exception):
    """One problem of a build.

    `where` is the place an author must edit (``content/page.md:12``); `fixture` is the fixture
    location the problem was found at (``bundles/s/golden.json:9``), when there is one.
    """

    def __init__(self, message: str, where: str = "", fixture: str = ""):
        self.message, self.where, self.fixture = message, where, fixture
        super().__init__(self.format())

    def format(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        return f"{text} [fixture {self.fixture}]" if self.fixture else text

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


class FixtureProblem(Exception):
    """Raised while reading a fixture; the caller adds the page location."""

    def __init__(self, message: str, fixture: str = ""):
        self.message, self.fixture = message, fixture
        super().__init__(f"{fixture}: {message}" if fixture else message)


class Errors:
    """Collects every error of a build so all of them are reported at once."""

    def __init__(self) -> None:
        self.items: list[BuildError] = []

    def add(self, error: BuildError) -> None:
        self.items.append(error)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def lines(self) -> list[str]:
        return [e.format() for e in self.items]
