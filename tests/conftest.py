from __future__ import annotations

from pathlib import Path

import pytest

from tests.sglang_wheel import sglang_root, sglang_site


@pytest.fixture(scope="session")
def stock_sglang_site() -> Path:
    """site-packages-like directory holding SGLang 0.5.23's real files, unpatched."""
    return sglang_site()


@pytest.fixture(scope="session")
def stock_sglang_root() -> Path:
    return sglang_root()
