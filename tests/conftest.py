from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest

import tf_accum as tfa
from tests import background
from tests.helpers import SPARSE_PATHS, sparse_row_loops

raw = tfa.raw_ops


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a background job (``cmd &``) with SIGINT ignored (and
    # tf_accum leaves every handler alone); the interrupt tests send real
    # SIGINTs and need them to reach Python as in a terminal, so the session
    # gets Python's own handler back before any test runs.
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_finish(session: pytest.Session) -> None:
    # the selected tests' child processes start now, beside the tests (tests/background.py)
    if not session.config.option.collectonly:
        background.start_for(session.items)


def pytest_sessionfinish() -> None:
    background.stop()


@pytest.fixture
def quiet_background() -> Iterator[None]:
    """No background job starts or ends while the test runs (a test measuring
    allocations with tracemalloc would count the jobs' thread's too)."""
    with background.SESSION.quiet():
        yield


def _dense_ops(prefix: str, constructor: str) -> SimpleNamespace:
    return SimpleNamespace(
        name=prefix or "ref",
        create=getattr(raw, constructor),
        apply=getattr(raw, f"{prefix}AccumulatorApplyGradient"),
        num=getattr(raw, f"{prefix}AccumulatorNumAccumulated"),
        set_step=getattr(raw, f"{prefix}AccumulatorSetGlobalStep"),
        take=getattr(raw, f"{prefix}AccumulatorTakeGradient"),
    )


@pytest.fixture(params=["ref", "resource"])
def ops(request: pytest.FixtureRequest) -> SimpleNamespace:
    """The dense raw ops, in their ref and their resource spelling."""
    if request.param == "ref":
        return _dense_ops("", "ConditionalAccumulator")
    return _dense_ops("Resource", "ResourceConditionalAccumulator")


@pytest.fixture
def f32() -> type:
    return np.float32


@pytest.fixture(params=["numpy", "compiled"])
def row_adds(request: pytest.FixtureRequest) -> Iterator[str]:
    """Sparse rows found and added by numpy, then by the compiled loops (sparse_kernel)."""
    if request.param not in SPARSE_PATHS:
        pytest.skip("numba (the fast extra) is not installed")
    with sparse_row_loops(request.param):
        yield request.param
