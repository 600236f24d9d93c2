"""The server's per-parameter weight checksums (``/weights_checker``, asked for with --weights-checker):
SGLang hashes every parameter on every rank for it, which takes up to the read timeout, so it is read only
on request. A server that does not serve it, or fails, leaves the weights unproven."""

from __future__ import annotations

from typing import TYPE_CHECKING

from validator.errors import UnavailableError
from validator.facts import SERVER, WEIGHTS
from validator.sources.gathering import Unreadable
from validator.sources.live_gathering import live_source

if TYPE_CHECKING:
    from validator.sources.live_gathering import LiveGathering


def _asked(g: LiveGathering) -> bool:
    return g.inputs.weights_checker


@live_source(WEIGHTS, 70, needs=(SERVER,), applies=_asked)
async def gather(g: LiveGathering) -> None:
    try:
        g.server.weights_checksums = await g.client.weights_checker()
    except UnavailableError as exc:
        raise Unreadable(str(exc)) from None
