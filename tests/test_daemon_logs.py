"""The sidecar's log as an operator reads it: JSON lines off a terminal, the console renderer on one, and on
either a server's control sequences never reach the terminal raw."""

from __future__ import annotations

import io
import json

from validator.daemon.logs import make_logger

# what a hostile server could put in a model name or an error body: clear the screen, redraw a line
HOSTILE = "ling\x1b[2J\x1b[1;1HPASS\rverdict pass\x9b31m"


def test_console_log_shows_control_sequences_inert() -> None:
    out = io.StringIO()
    # structlog's console renderer repr()s field values but prints the event text as it is
    make_logger(out, color=True).warning(f"server answered {HOSTILE}", error=HOSTILE)
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\x1b[1;1H" not in text and "\r" not in text and "\x9b" not in text
    assert "\\x1b[2J" in text and "\\x0d" in text  # visible, so the operator sees what was sent
    assert "\x1b[" in text  # the renderer's own colours are still there


def test_json_log_keeps_the_value_and_escapes_it() -> None:
    out = io.StringIO()
    make_logger(out, color=False).warning("check crashed", error=HOSTILE)
    line = out.getvalue().strip()
    assert "\x1b" not in line and "\r" not in line  # JSON escapes control characters
    assert json.loads(line)["error"] == HOSTILE  # a collector gets the exact value
