"""The behaviour suites, run again with the Ray table installed.

Every test of these modules is collected here a second time (named
``<test>__<module>``) with the Ray table as the process's table, so the raw
ops, both compat classes and the seam's cancellation run unchanged against
accumulators held by a host actor. ``kind`` (tests/kinds.py) covers both
accumulator kinds, as in tests/test_blocking.py.

Not here: tests that reach into the in-process accumulator or table
(test_resource_table, test_memory, test_hostile_inputs, test_fork_and_pickle,
test_fast_paths)
or into signal delivery (test_interrupts), and the graph-mode and example
suites (they use the table only through the same raw ops).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest

from tests.kinds import KINDS

SUITES = [
    importlib.import_module(f"tests.{name}")
    for name in (
        "test_blocking",
        "test_compat_dense",
        "test_compat_sparse",
        "test_dense_ops",
        "test_dtypes_and_arithmetic",
        "test_errors_and_shapes",
        "test_seam",
        "test_sparse_ops",
        "test_sparse_properties",
        "test_stateful",
        "test_sparse_wrap",
        "test_stats",
    )
]


# Tests not collected here, each with why its rule needs no run on Ray.
NOT_ON_RAY = {
    # the state machine is collected below, with its own budget
    "TestAccumulatorMachine": "tests.test_stateful",
    # 131,039 applies, one round trip each. The host divides with the in-process
    # accumulator's own code, tested at those counts in-process; the float16 count
    # is checked on Ray by test_a_float16_mean_divides_by_the_count_in_float16.
    "test_float16_mean_of_more_gradients_than_float16_can_count": (
        "tests.test_dtypes_and_arithmetic"
    ),
}


# Not bound to a module-level name: pytest collects every unittest.TestCase
# subclass it finds there, whatever its name, so a name would run the state
# machine a second time with the full in-process budget.
class TestAccumulatorMachineOnRay(
    importlib.import_module("tests.test_stateful").AccumulatorMachine.TestCase  # type: ignore[misc]
):
    """The state machine with a smaller budget: every call is a round trip here."""

    settings = hypothesis.settings(max_examples=25, stateful_step_count=30, deadline=None)


for _suite in SUITES:
    _short = _suite.__name__.rsplit(".", 1)[-1]
    for _name in dir(_suite):
        if _name.startswith(("test_", "Test")) and NOT_ON_RAY.get(_name) != _suite.__name__:
            globals()[f"{_name}__{_short}"] = getattr(_suite, _name)


def test_every_test_left_out_on_ray_exists() -> None:
    for name, module in NOT_ON_RAY.items():
        assert hasattr(importlib.import_module(module), name), (name, module)


@pytest.fixture(autouse=True)
def _on_ray(ray_table: Any) -> Iterator[None]:
    yield


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def kind(request: pytest.FixtureRequest) -> Any:
    return request.param
