"""Will spark-validate's SGLang plugin load in the server, and will its LM-head remedy be on?

Preflight credits the remedy only when every switch agrees, read from the server's environment as the
deciding code reads it: SGLang 0.5.23's ``load_plugins_by_group`` (``SGLANG_PLUGINS`` whitelist), the
plugin's ``register`` (``SPARK_VALIDATE_PLUGIN``) and ``remedy_enabled`` (``SPARK_VALIDATE_SHARE_LM_HEAD``).
The plugin stays off the CLI's import path, so its rules are restated here and held to its own functions
by ``tests/test_plugin_env.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from validator.facts import LAUNCH, PLUGIN_SHARE_ENV, PluginState
from validator.sources.gathering import Gathering, preflight_source

PLUGIN_NAME = "spark_validate"  # the entry point's name in the sglang.srt.plugins group
ENV_DISABLE = "SPARK_VALIDATE_PLUGIN"
ENV_SHARE = PLUGIN_SHARE_ENV
ENV_WHITELIST = "SGLANG_PLUGINS"
_TRUE = frozenset({"1", "true", "yes", "on"})


def plugin_disabled(env: Mapping[str, str]) -> bool:
    return env.get(ENV_DISABLE, "1").strip() == "0"


def remedy_requested(env: Mapping[str, str]) -> bool:
    return env.get(ENV_SHARE, "").strip().lower() in _TRUE


def whitelisted(env: Mapping[str, str]) -> bool:
    allowed = env.get(ENV_WHITELIST, "")
    if not allowed:
        return True
    return PLUGIN_NAME in {x.strip() for x in allowed.split(",") if x.strip()}


def plugin_state(env: Mapping[str, str], installed: Set[str]) -> PluginState:
    """The plugin as the server with environment ``env`` will run it (``installed``: the entry points
    of the ``sglang.srt.plugins`` group beside the server's SGLang)."""
    present = PLUGIN_NAME in installed
    requested = remedy_requested(env)
    if not present:
        return PluginState(False, False, False, "the spark-validate plugin is not installed beside SGLang")
    if not whitelisted(env):
        why = f"{ENV_WHITELIST}={env.get(ENV_WHITELIST)!r} does not list {PLUGIN_NAME}, so SGLang skips it"
        return PluginState(True, False, False, why)
    if plugin_disabled(env):
        return PluginState(True, False, False, f"{ENV_DISABLE}=0 turns the plugin off")
    if not requested:
        value = env.get(ENV_SHARE)
        shown = "is not set" if value is None else f"is {value!r}, not one of 1/true/yes/on"
        return PluginState(True, True, False, f"{ENV_SHARE} {shown}")
    return PluginState(True, True, True, f"{ENV_SHARE}={env[ENV_SHARE]}")


@preflight_source("plugin", 20, needs=(LAUNCH,), applies=Gathering.installed)  # cites launch and install
def gather(g: Gathering) -> None:
    """The plugin as the server's environment and the install's entry points decide it."""
    g.facts.plugin = plugin_state(g.launch.env, g.sglang.plugins)
