"""A simulator process as the readers see it: the SGLang command it stands in for.

``spark-validate sim --scenario S --host H --port P -- ARGS`` serves what ``python -m sglang.launch_server``
with the scenario's launch arguments on H:P, then ARGS, would; discovery (``check`` with no ``--url``) and
``launch -- sim`` judge that command. :data:`STAND_IN` declares it to them, as the entry point
``spark_validate.stand_ins: sim`` (pyproject.toml): the readers know stand-ins, never the simulator.
"""

from __future__ import annotations

from validator.errors import UnavailableError
from validator.sim import scenarios
from validator.sim.server_args import launch_argv
from validator.sources.host.server_command import StandIn

DEFAULT_PORT = 30000
# one --scenario value: every known name, comma-separated, is about 330 characters. Discovery reads the argv
# of every simulator-like process, another user's included, before it judges whose it is: a longer value
# is refused before it is split, so that such an argv costs what an SGLang argv costs to read
MAX_SCENARIO_CHARS = 1024
# the simulator's own options that take a value (validator/commands/sim.py)
_SIM_VALUED = {"--scenario", "--host", "--port", "--seed", "--speed", "--startup-seconds", "--api-key-file",
               "--log", "--attestation"}  # fmt: skip


def sglang_args(sim_args: list[str]) -> list[str]:
    """The SGLang arguments (after ``python -m sglang.launch_server``) a simulator process stands in for:
    its scenario's launch arguments on its host and port, then the arguments after ``--`` (``--nnodes 2
    --node-rank 1 ...``)."""
    names: list[str] = []
    host, port, extra = "127.0.0.1", DEFAULT_PORT, []
    i = 0
    while i < len(sim_args):
        word = sim_args[i]
        if word == "--":
            extra = sim_args[i + 1 :]
            break
        name, eq, inline = word.partition("=")
        if name in _SIM_VALUED:
            value = inline if eq else (sim_args[i + 1] if i + 1 < len(sim_args) else "")
            i += 1 if eq else 2
            if name == "--scenario":
                if len(value) > MAX_SCENARIO_CHARS:  # refused before it is split: any user writes this argv
                    raise UnavailableError(
                        f"a --scenario value of {len(value)} characters is no simulator's (at most "
                        f"{MAX_SCENARIO_CHARS}: {len(scenarios.SCENARIOS)} scenarios are known)"
                    )
                names.extend(n for n in value.split(",") if n)
            elif name == "--host":
                host = value
            elif name == "--port":
                # ASCII digits only: str.isdigit() is true of "²", which int() refuses (ValueError)
                port = int(value) if value.isascii() and value.isdigit() else DEFAULT_PORT
            continue
        i += 1
    try:
        scenario = scenarios.resolve(names or ["healthy"])
    except Exception as exc:  # an unknown scenario: the simulator itself refused to start with it
        raise UnavailableError(f"the simulator's scenario {names} is not known: {exc}") from None
    return launch_argv(scenario, host=host, port=port, api_key=None, extra=tuple(extra))


STAND_IN = StandIn(
    name="spark-validate sim",
    what="the simulator",
    programs=(("spark-validate", "sim"),),
    modules=(("validator", "sim"), ("validator.sim",)),
    server_args=sglang_args,
    located_by="simulator",
    note="spark-validate's simulator stands in for SGLang here: no SGLang install runs it",
    build_id="spark-validate simulator",
)
