"""What a source's row is (``Source``), and what a preflight reader is given: the inputs, the facts so far,
and what the launch source established about where the server runs (its environment, its container).

A reader is a function in its source's module, declared there by its row: ``@preflight_source(name, rank,
needs=..., applies=...)`` above ``def gather(g: Gathering) -> None`` (a live reader: ``live_gathering``). It
puts its record on ``g.facts``; evidence it could not read is ``Unreadable``, which the gathering loop
(``validator.source_table.read_sources``) records as ``facts.errors[source]`` (checks turn it into ``error``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from validator.errors import InputError
from validator.facts import Facts, LaunchFacts, SGLangInstallFacts

if TYPE_CHECKING:
    from validator.preflight_inputs import PreflightInputs
    from validator.sources.container import ContainerSpec


class _Given(Protocol):  # what every reader is given holds the facts (Gathering, LiveGathering)
    @property
    def facts(self) -> Facts: ...


G = TypeVar("G", bound=_Given)  # what the reader is given: ``Gathering`` (preflight) or ``LiveGathering``
R = TypeVar("R", covariant=True)  # what it returns: None (preflight), an awaitable of None (live)


@dataclass(frozen=True)
class Source(Generic[G, R]):
    """One evidence source: a row of its table, declared beside its reader."""

    name: str  # the facts key: ``facts.errors[name]``, a check result's ``sources``
    reader: Callable[[G], R]  # reads it and puts its record on ``g.facts``; ``Unreadable``: why not
    needs: tuple[str, ...] = ()  # sources that must have been read before it (their records are set)
    applies: Callable[[G], bool] | None = None  # None: whenever its needs are read
    rank: int = 0  # where its table reads it: lower first (each table's ranks are distinct)


class Rows(Generic[G, R]):
    """One table's registry, and the decorator its readers declare their rows with:
    ``@preflight_source(NAME, RANK, needs=..., applies=...)`` over the reader."""

    def __init__(self) -> None:
        self.rows: dict[str, Source[G, R]] = {}  # filled by the readers' modules as they are imported

    def __call__(
        self,
        name: str,
        rank: int,
        *,
        needs: tuple[str, ...] = (),
        applies: Callable[[G], bool] | None = None,
    ) -> Callable[[Callable[[G], R]], Callable[[G], R]]:
        """Declare the decorated function the reader of source ``name``: read at ``rank`` (lower first),
        after the sources it ``needs``, when it ``applies``."""

        def declare(reader: Callable[[G], R]) -> Callable[[G], R]:
            self.add(Source(name, reader, needs, applies, rank))
            return reader

        return declare

    def add(self, row: Source[G, R]) -> None:
        """A name or a rank given twice would make the facts key, or the order, depend on which module
        was imported first: refused."""
        if row.name in self.rows:
            raise RuntimeError(f"source {row.name!r} declared twice")
        if any(other.rank == row.rank for other in self.rows.values()):
            raise RuntimeError(f"source {row.name!r}: rank {row.rank} is already another row's")
        self.rows[row.name] = row


class Unreadable(Exception):
    """The source's evidence could not be read; the message says why (it becomes the checks' message)."""


def permission_denied(exc: PermissionError) -> str:
    """A file or directory this user may not read, in one line naming it: the evidence is unknown, the
    checks that needed it are ``error`` (never an internal error, never judged on an absence)."""
    where = exc.filename if exc.filename is not None else "a file"
    return f"cannot read {where}: permission denied (run as root or as a user who may read it)"


@dataclass
class Gathering:
    inputs: PreflightInputs
    facts: Facts
    # malformed evidence files are recorded here instead of aborting the run (None: raise them)
    malformed: list[InputError] | None = None
    # set by the launch source, for the sources after it:
    env: dict[str, str] = field(default_factory=dict)  # the environment the server will see
    container: ContainerSpec | None = None  # the container a docker, Compose or Kubernetes input runs
    hidden_install: str | None = None  # why the install is not visible here (inside the image)

    @property
    def launch(self) -> LaunchFacts:
        """The launch command (a source that needs the launch source runs only once it is read)."""
        assert self.facts.launch is not None
        return self.facts.launch

    @property
    def sglang(self) -> SGLangInstallFacts:
        assert self.facts.sglang is not None
        return self.facts.sglang

    def installed(self) -> bool:
        """The server's own SGLang was read (its site directories are the server's): a row's ``applies``."""
        return self.sglang.root is not None

    @property
    def service_user(self) -> str | None:
        """The account the server runs as: --service-user, else the unit's User= (systemd runs it so)."""
        launch = self.facts.launch
        return self.inputs.service_user or (launch.user if launch is not None else None)


PreflightSource = Source[Gathering, None]
preflight_source: Rows[Gathering, None] = Rows()  # the rows of ``validator.source_table.PREFLIGHT``
