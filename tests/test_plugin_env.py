"""The plugin's switches as preflight reads them agree with the code that really decides:
the plugin's own ``remedy_enabled`` and off-switch, and SGLang 0.5.23's ``SGLANG_PLUGINS`` whitelist."""

from __future__ import annotations

import ast
import itertools

import pytest

from tests.support.sglang_wheel import sglang_root
from validator.plugin import ENV_DISABLE as PLUGIN_ENV_DISABLE
from validator.plugin.remedy import ENV_SHARE as PLUGIN_ENV_SHARE
from validator.plugin.remedy import remedy_enabled
from validator.sources.sglang.plugin_env import (
    ENV_DISABLE,
    ENV_SHARE,
    plugin_state,
    remedy_requested,
    whitelisted,
)

VALUES = ["1", "0", "true", "TRUE", " yes ", "on", "y", "no", "", "2", "off", " 0 "]


def test_names_are_the_plugins_own() -> None:
    assert (ENV_DISABLE, ENV_SHARE) == (PLUGIN_ENV_DISABLE, PLUGIN_ENV_SHARE)


@pytest.mark.parametrize("value", VALUES)
def test_remedy_switch_reads_like_the_plugin(value: str) -> None:
    """`y` used to be credited by preflight (SGLang's EnvBool spelling) while the plugin ignores it."""
    assert remedy_requested({ENV_SHARE: value}) == remedy_enabled({ENV_SHARE: value})


def test_off_switch_reads_like_the_plugins_register() -> None:
    """register() returns at once when the variable, stripped, is "0"; the source states that rule."""
    import inspect

    import validator.plugin as plugin

    text = inspect.getsource(plugin.register)
    assert 'os.environ.get(ENV_DISABLE, "1").strip() == "0"' in text
    for value, off in (("0", True), (" 0 ", True), ("1", False), ("", False), ("false", False)):
        state = plugin_state({ENV_DISABLE: value, ENV_SHARE: "1"}, {"spark_validate"})
        assert state.loads is (not off) and state.remedy is (not off), value


def test_whitelist_reads_like_sglang_load_plugins() -> None:
    """SGLang 0.5.23: a non-empty SGLANG_PLUGINS is a comma list of stripped names; empty loads all."""
    init = (sglang_root() / "srt" / "plugins" / "__init__.py").read_text()
    tree = ast.parse(init)
    assert 'allowed_set = {x.strip() for x in allowed_str.split(",") if x.strip()}' in init
    assert any(isinstance(n, ast.FunctionDef) and n.name == "load_plugins_by_group" for n in tree.body)
    for value, loads in (
        (None, True),
        ("", True),
        ("spark_validate", True),
        (" other , spark_validate ", True),
        ("other", False),
        (",", False),  # a non-empty string naming nobody: SGLang's set is empty and skips every plugin
    ):
        env = {} if value is None else {"SGLANG_PLUGINS": value}
        assert whitelisted(env) is loads, value


def test_every_combination_credits_the_remedy_only_when_all_switches_agree() -> None:
    for installed, share, disable, allowed in itertools.product(
        (True, False), ("1", "0", None), ("0", "1", None), ("spark_validate", "other", None)
    ):
        env = {
            k: v for k, v in ((ENV_SHARE, share), (ENV_DISABLE, disable), ("SGLANG_PLUGINS", allowed)) if v
        }
        state = plugin_state(env, {"spark_validate"} if installed else set())
        expected = installed and share == "1" and disable != "0" and allowed != "other"
        assert state.remedy is expected, env
        assert state.why
