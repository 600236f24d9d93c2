"""What a preflight source's reader is given: the inputs, the facts gathered so far, and what the launch
source established about where the server runs (its environment, its container).

A reader (``gather(g: Gathering) -> None`` in its source's module, declared in
``validator.source_table``) puts its record on ``g.facts``; evidence it could not read is ``Unreadable``,
which ``preflight.gather`` records as ``facts.errors[source]`` (checks turn it into ``error``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from validator.errors import InputError
from validator.facts import Facts, LaunchFacts, SGLangInstallFacts

if TYPE_CHECKING:
    from validator.preflight_inputs import PreflightInputs
    from validator.sources.container import ContainerSpec


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

    @property
    def service_user(self) -> str | None:
        """The account the server runs as: --service-user, else the unit's User= (systemd runs it so)."""
        launch = self.facts.launch
        return self.inputs.service_user or (launch.user if launch is not None else None)
