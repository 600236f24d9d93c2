"""The typed view of a server's settings: ``ServerArgs``, read alike from a parsed launch command, from
``/server_info`` and from a log's ``server_args=`` line.

Why apart from ``validator.facts``: a record holds what its source read, raw (the mappings declarative rules
walk); this view is the builtin checks' reading of those mappings, one typed field per setting they compare,
so that the three places a server states its settings can be compared field by field. The records build
it (``LaunchFacts.settings``, ``ServerFacts.settings``); the checks import it from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# how ``ServerArgs.from_mapping`` reads a field of each type (its annotation, a string)
_READ: dict[str, Callable[[object], object]] = {"str | None": _text, "int | None": _int, "bool": bool}


@dataclass(frozen=True)
class ServerArgs:
    """The server settings builtin checks compare, typed, read the same way from a parsed launch command,
    from ``/server_info`` and from a log's ``server_args=`` line (so the three can be compared field by
    field). The raw mappings stay on their records for declarative rules."""

    model_path: str | None = None
    served_model_name: str | None = None
    port: int | None = None
    tp_size: int | None = None
    moe_runner_backend: str | None = None
    speculative_moe_runner_backend: str | None = None
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_draft_model_path: str | None = None
    enable_fp32_lm_head: bool = False
    speculative_dspark_block_size: int | None = None  # DSPARK: gamma, overriding the draft's block size
    enable_linear_replayssm_spec: bool = False  # the KDA ReplaySSM spec-verify ring
    linear_replayssm_cache_len: int | None = None  # its length (SGLang's default 16)
    version: str | None = None  # /server_info only
    launch_command: str | None = None  # /server_info only: the command line as given (NEXTN unresolved)
    avg_spec_accept_length: float | None = None  # /server_info internal_states: the server's lifetime mean

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object]) -> ServerArgs:
        """Each field from the setting of its name, by its type; the accept length from internal_states."""
        values: dict[str, Any] = {
            f.name: _READ[str(f.type)](raw.get(f.name))
            for f in fields(cls)
            if f.name != "avg_spec_accept_length"
        }
        return cls(**values, avg_spec_accept_length=_lifetime_accept_length(raw.get("internal_states")))

    @property
    def speculative(self) -> bool:
        return bool(self.speculative_algorithm)


def _lifetime_accept_length(states: object) -> float | None:
    for state in states if isinstance(states, list) else []:
        if isinstance(state, dict):
            value = state.get("avg_spec_accept_length")
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
    return None


class LoggedArgs(Protocol):
    """What :func:`logged_settings` reads of a log's record (``validator.facts.LogFacts``): its last
    start's ``server_args=``. Named structurally because the records build this view, so this module sits
    below them and imports none of them."""

    @property
    def server_args(self) -> Mapping[str, object] | None: ...


def logged_settings(log: LoggedArgs) -> ServerArgs | None:
    """A log's ``server_args=`` of the last start, typed (None when the log has none)."""
    return None if log.server_args is None else ServerArgs.from_mapping(log.server_args)
