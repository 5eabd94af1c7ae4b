"""The behaviour suites that run over both accumulator kinds, on the Ray table."""

from __future__ import annotations

from typing import Any

import pytest

from tests import test_blocking
from tests.kinds import KINDS

# The suite's tests, collected here again; they find ``kind`` below.
globals().update(
    {name: getattr(test_blocking, name) for name in dir(test_blocking) if name.startswith("test_")}
)


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def kind(request: pytest.FixtureRequest, ray_table: Any) -> Any:
    return request.param
