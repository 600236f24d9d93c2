"""The validator's errors survive pickling: a reader run in a child process (as another user, by
``tests/support/second_user.call_as``, or in a worker) raises them there and the parent must receive the
same error, not ``TypeError: __init__() missing ...`` from rebuilding it with the wrong arguments."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from tests.support.second_user import User, call_as
from validator.errors import ExitCode, InputError, UsageError, ValidatorError
from validator.rulepack import PackError
from validator.sources.host.process import ProcessGone
from validator.sources.server.replies import ServerError


def test_every_kind_of_error_comes_back_as_itself() -> None:
    errors: list[ValidatorError] = [
        UsageError("--output: no such directory"),
        InputError("/etc/sglang.env", "line is not NAME=value", 3),
        InputError("/etc/sglang.env", "unreadable"),
        PackError("site.yaml", [(4, "expct", "unknown key"), (9, "severity", "must be one of ...")]),
        ServerError("/server_info", "HTTP 503", 503, transient=True),
        ProcessGone("process 4242 exited while being read"),
    ]
    for error in errors:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert str(back) == str(error) and back.exit_code == error.exit_code
        assert vars(back) == vars(error)
    pack = pickle.loads(pickle.dumps(errors[3]))
    assert isinstance(pack, PackError) and pack.problems == errors[3].problems and pack.line == 4
    assert pack.exit_code is ExitCode.DATAERR


def test_an_input_error_raised_as_the_second_user_reaches_the_parent(attacker: User, tmp_path: Path) -> None:
    """The path the trust tests take: the child drops to the second account, raises, the parent re-raises."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    where = str(private)

    def unreadable() -> None:
        try:
            os.listdir(where)
        except PermissionError as exc:
            raise InputError(where, f"cannot list: {exc.strerror}") from None

    try:
        call_as(attacker, unreadable, timeout=30)
    except InputError as exc:
        assert exc.where == where and exc.reason == "cannot list: Permission denied"
        assert str(exc) == f"{where}: cannot list: Permission denied"
    else:
        raise AssertionError(f"the second user listed {where}")
