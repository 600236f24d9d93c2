from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.private_dir import NoPrivateBase, private_base
from tests.support.second_user import User, ensure_user
from tests.support.sglang_wheel import sglang_root, sglang_site

# Files the verdict must trust (packs, env files, attestations) go to tmp_path, so pytest's temporary tree
# lives in a private base directory whose whole chain was checked first (tests/support/private_dir.py):
# never /tmp, which is world-writable, and never the checkout's path taken on trust (a clone under /tmp).
# Tests that need a shared directory make one on purpose (the ``shared`` fixture).
if "PYTEST_DEBUG_TEMPROOT" not in os.environ:
    try:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(private_base())
    except NoPrivateBase as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session")
def stock_sglang_site() -> Path:
    """site-packages-like directory holding SGLang 0.5.23's real files, unpatched."""
    return sglang_site()


@pytest.fixture(scope="session")
def stock_sglang_root() -> Path:
    return sglang_root()


@pytest.fixture(scope="session")
def api_types(stock_sglang_root: Path) -> ModuleType:
    """SGLang's generated JSON contract (``sglang/api/v1/api_types.py``), loaded by file path: it needs only
    msgspec and never imports sglang itself."""
    path = stock_sglang_root / "api" / "v1" / "api_types.py"
    spec = importlib.util.spec_from_file_location("sglang_api_types_contract", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _no_registered_secrets_across_tests() -> Iterator[None]:
    """``redact.register_secret`` is process-wide by design (a CLI run registers its key once); in the test
    process one test's URL password or key must not change what another test's redaction shows."""
    from validator import redact

    saved = set(redact._REGISTERED)
    yield
    redact._REGISTERED.clear()
    redact._REGISTERED.update(saved)


@pytest.fixture(scope="module")
def attacker() -> User:
    """The second local account the trust tests attack as (created once, as root)."""
    return ensure_user()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A real shared directory (a team's working directory, a scratch area): anyone may write it."""
    path = Path(tempfile.mkdtemp(prefix="sv-shared-", dir="/tmp"))
    os.chmod(path, 0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
