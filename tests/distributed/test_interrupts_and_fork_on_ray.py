"""Ctrl-C during a take whose accumulator lives in a host actor: withdrawn, or,
served just before, lost with the interrupt (a host cannot take a served round
back) unless interrupts are deferred, the interrupt raised either way; and a child forked from a process
attached to Ray, which has no working connection (README, "Interrupts, fork
and pickling")."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time
import weakref
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import in_forked_child, wait_for_waiting, wait_until
from tf_accum import errors
from tf_accum.accumulators.interrupts import deferred_interrupts
from tf_accum.distributed.proxy import HostLink

raw = tfa.raw_ops

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals need the main thread"
)


def _accumulator() -> int:
    return raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[4], reduction_type="SUM")


def _apply(h: int, value: float) -> None:
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=0, gradient=np.full(4, value, np.float32)
    )


def _take(h: int) -> Any:
    return raw.ResourceAccumulatorTakeGradient(
        handle=h, num_required=1, dtype=tfa.float32, timeout=30.0
    )


def _stats(h: int) -> dict[str, Any]:
    return dict(tfa.accumulator_stats(h))


def _sigint_once_waiting(h: int) -> threading.Thread:
    def send() -> None:
        wait_for_waiting(h, 1)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def test_ctrl_c_withdraws_a_waiting_remote_take_at_once(ray_table) -> None:
    h = _accumulator()
    sender = _sigint_once_waiting(h)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _take(h)
    assert time.monotonic() - start < 20  # the signal woke it, not the take's timeout
    sender.join(10)
    wait_until(lambda: _stats(h)["waiting"] == 0)  # withdrawn
    stats = _stats(h)
    assert stats["takes_interrupted"] == 1 and stats["takes_served"] == 0
    _apply(h, 3.0)  # not eaten by the withdrawn take
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1
    np.testing.assert_array_equal(_take(h), np.full(4, 3.0, np.float32))
    raw.DestroyResourceOp(resource=h)


@pytest.mark.parametrize("deferring", [False, True], ids=["default", "deferred"])
def test_a_remote_take_served_before_its_withdrawal_raises_the_interrupt(
    ray_table, monkeypatch, deferring: bool
) -> None:
    """By default the round goes back to the host (it reached the caller's
    process, not the program); in ``deferred_interrupts()`` the take returns
    it first."""
    h = _accumulator()
    withdraw = HostLink.withdraw

    def serve_then_withdraw(link: HostLink, attempt: str, reason: str) -> None:
        # The round is served in the host between Ctrl-C and the withdrawal.
        _apply(h, 2.0)
        wait_until(lambda: _stats(h)["takes_served"] == 1)
        withdraw(link, attempt, reason)

    monkeypatch.setattr(HostLink, "withdraw", serve_then_withdraw)
    sender = _sigint_once_waiting(h)
    results: list[Any] = []
    with (
        deferred_interrupts() if deferring else contextlib.nullcontext(),
        pytest.raises(KeyboardInterrupt),  # never swallowed
    ):
        results.append(_take(h))
    sender.join(10)
    monkeypatch.undo()
    if not deferring:
        assert not results
        wait_until(lambda: _stats(h)["takes_served"] == 0)  # given back
        stats = _stats(h)
        assert stats["takes_interrupted"] == 1 and stats["waiting"] == 0
        assert stats["num_accumulated"] == 1 and stats["global_step"] == 0
        np.testing.assert_array_equal(_take(h), np.full(4, 2.0, np.float32))
        raw.DestroyResourceOp(resource=h)
        return
    assert len(results) == 1
    np.testing.assert_array_equal(results[0], np.full(4, 2.0, np.float32))
    stats = _stats(h)
    assert stats["takes_served"] == 1 and stats["takes_interrupted"] == 0
    assert stats["num_accumulated"] == 0 and stats["global_step"] == 1 and stats["waiting"] == 0
    _apply(h, 3.0)  # a gradient of the old step is stale now
    assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 0
    raw.DestroyResourceOp(resource=h)


def _in_child(inherited: int) -> str:
    try:
        raw.ResourceAccumulatorNumAccumulated(handle=inherited)
        return "an inherited handle still worked"
    except errors.NotFoundError:
        pass
    try:
        _accumulator()
        return "a new accumulator was made"
    except errors.UnavailableError as exc:
        return "refused" if "forked" in exc.message and "spawn" in exc.message else exc.message


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_child_is_refused_clearly_and_the_parent_keeps_working(ray_table) -> None:
    h = _accumulator()
    _apply(h, 1.0)
    assert in_forked_child(lambda: _in_child(h)) == "refused"
    _apply(h, 2.0)  # the parent's connection is untouched
    np.testing.assert_array_equal(_take(h), np.full(4, 3.0, np.float32))
    raw.DestroyResourceOp(resource=h)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_child_releases_nothing_of_the_parents_ray_objects(ray_table) -> None:
    # A child inherits Ray's locks as the parent's threads held them at the fork:
    # releasing an inherited actor handle or object ref there can wait on one of
    # them for good, so the child disowns the parent's links without freeing them.
    h = _accumulator()
    _apply(h, 1.0)
    link = weakref.ref(ray_table.lookup(h).link)

    def in_child() -> str:
        gc.collect()
        return "kept" if link() is not None else "released"

    assert in_forked_child(in_child) == "kept"
    raw.DestroyResourceOp(resource=h)
