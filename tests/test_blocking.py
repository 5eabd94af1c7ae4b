"""Takes that wait: FIFO service, wake-up, timeouts, cancellation, many threads.

Every wait is bounded (tests/helpers.py), so a bug fails instead of hanging.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import WAIT, Background, wait_for_waiting, waiting_takes
from tests.kinds import KINDS
from tf_accum import errors

raw = tfa.raw_ops


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def kind(request):
    return request.param


def num(h: int) -> int:
    return int(raw.AccumulatorNumAccumulated(handle=h))


def test_take_blocks_until_enough_gradients(kind) -> None:  # D23, E19, S31
    h = kind.create()
    kind.apply(h, 1)
    kind.apply(h, 2)
    released = threading.Event()
    seen_released = []

    def taker():
        result = kind.take(h, 3)
        seen_released.append(released.is_set())
        return result

    bg = Background(taker)
    wait_for_waiting(h, 1)
    assert not bg.done()
    assert num(h) == 2
    released.set()
    kind.apply(h, 6)
    assert kind.total(bg.result()) == pytest.approx(3.0)
    assert seen_released == [True]  # the take returned only after the third apply
    assert num(h) == 0


def test_release_bumps_step_so_old_step_gradients_are_stale(kind) -> None:  # D24
    h = kind.create()
    bg = Background(kind.take, h, 2)
    wait_for_waiting(h, 1)
    kind.apply(h, 1)
    kind.apply(h, 3)
    assert kind.total(bg.result()) == pytest.approx(2.0)
    kind.apply(h, 100)
    assert num(h) == 0


def test_waiting_takes_are_served_in_order_each_with_a_fresh_batch(kind) -> None:  # D25
    h = kind.create()
    first = Background(kind.take, h, 1)
    wait_for_waiting(h, 1)
    second = Background(kind.take, h, 1)
    wait_for_waiting(h, 2)
    kind.apply(h, 1)
    assert kind.total(first.result()) == 1.0
    assert not second.done()
    kind.apply(h, 2)  # step 0 is stale now
    assert waiting_takes(h) == 1 and not second.done()
    kind.apply(h, 3, step=1)
    assert kind.total(second.result()) == 3.0


def test_head_of_line_blocking(kind) -> None:  # D26
    h = kind.create()
    head = Background(kind.take, h, 3)
    wait_for_waiting(h, 1)
    kind.apply(h, 1)
    behind = Background(kind.take, h, 1)
    wait_for_waiting(h, 2)
    assert num(h) == 1 and not behind.done()
    kind.apply(h, 2)
    kind.apply(h, 3)
    assert kind.total(head.result()) == pytest.approx(2.0)
    wait_for_waiting(h, 1)
    assert not behind.done()
    kind.apply(h, 9, step=1)
    assert kind.total(behind.result()) == 9.0


def test_timed_out_head_lets_the_next_take_through(kind) -> None:  # D27; docs/departures.md T2
    h = kind.create()
    head = Background(kind.take, h, 3, timeout=0.3)
    wait_for_waiting(h, 1)
    behind = Background(kind.take, h, 1)
    wait_for_waiting(h, 2)
    kind.apply(h, 7)
    assert not behind.done()
    error = head.error()
    assert isinstance(error, errors.DeadlineExceededError)
    assert str(error) == "Timed out waiting for notification"
    assert kind.total(behind.result()) == 7.0


def test_timed_out_take_consumes_nothing(kind) -> None:  # D28; docs/departures.md T2
    h = kind.create()
    with pytest.raises(errors.DeadlineExceededError, match="Timed out waiting for notification"):
        kind.take(h, 1, timeout=0.05)
    assert waiting_takes(h) == 0
    kind.apply(h, 4)
    assert num(h) == 1


def test_zero_timeout_is_a_poll(kind) -> None:
    h = kind.create()
    with pytest.raises(errors.DeadlineExceededError):
        kind.take(h, 1, timeout=0)
    kind.apply(h, 4)
    assert kind.total(kind.take(h, 1, timeout=0)) == 4.0


def test_destroy_cancels_every_waiting_take(kind) -> None:  # D29, S32; docs/departures.md T3
    h = kind.create()
    takers = [Background(kind.take, h, 1 + i) for i in range(3)]
    wait_for_waiting(h, 3)
    raw.DestroyResourceOp(resource=h, ignore_lookup_error=False)
    for bg in takers:
        error = bg.error()
        assert isinstance(error, errors.CancelledError)
        assert str(error) == "TakeGrad operation was cancelled"
    with pytest.raises(errors.NotFoundError):
        kind.apply(h, 1)


def test_set_global_step_does_not_wake_a_take(kind) -> None:  # D30
    h = kind.create()
    kind.apply(h, 1)
    bg = Background(kind.take, h, 2)
    wait_for_waiting(h, 1)
    raw.AccumulatorSetGlobalStep(handle=h, new_global_step=5)
    assert waiting_takes(h) == 1
    kind.apply(h, 1, step=4)
    assert waiting_takes(h) == 1 and not bg.done()
    kind.apply(h, 3, step=5)
    assert kind.total(bg.result()) == pytest.approx(2.0)


def test_a_waiting_take_does_not_spin(kind) -> None:
    h = kind.create()
    bg = Background(kind.take, h, 1)
    wait_for_waiting(h, 1)
    cpu_before, wall_before = time.process_time(), time.monotonic()
    time.sleep(0.3)
    cpu_used = time.process_time() - cpu_before
    assert time.monotonic() - wall_before >= 0.3
    assert cpu_used < 0.15, f"a blocked take used {cpu_used:.3f}s of CPU in 0.3s"
    kind.apply(h, 1)
    bg.result()


def test_many_appliers_and_takers_lose_nothing(kind) -> None:
    """Every accepted gradient comes out of exactly one take (sum and count)."""
    h = kind.create(reduction_type="SUM", dtype=tfa.int64)
    appliers, per_thread = 4, 300
    start = threading.Barrier(appliers + 2)
    appliers_done = threading.Event()
    taken: list[tuple[int, int]] = []
    taken_lock = threading.Lock()

    def apply_all(offset: int) -> None:
        start.wait(WAIT)
        for i in range(per_thread):
            # a step far ahead of every take's bump, so nothing is stale
            kind.apply(h, offset * per_thread + i, step=2**40, dtype=np.int64)

    def take_until_drained(n: int) -> None:
        start.wait(WAIT)
        while True:
            try:
                result = kind.take(h, n, dtype=tfa.int64, timeout=0.05)
            except errors.DeadlineExceededError:
                if appliers_done.is_set():
                    return
                continue
            with taken_lock:
                taken.append((int(kind.total(result)), int(kind.count(result))))

    workers = [Background(apply_all, t) for t in range(appliers)]
    takers = [Background(take_until_drained, n) for n in (1, 3)]
    for w in workers:
        w.result(timeout=60)
    appliers_done.set()
    for t in takers:
        t.result(timeout=60)
    rest = num(h)
    if rest:
        result = kind.take(h, rest, dtype=tfa.int64)
        taken.append((int(kind.total(result)), int(kind.count(result))))
    n_total = appliers * per_thread
    assert sum(c for _, c in taken) == n_total
    assert sum(t for t, _ in taken) == n_total * (n_total - 1) // 2


def test_concurrent_takes_each_get_distinct_rounds(kind) -> None:
    h = kind.create(reduction_type="SUM")
    takers = [Background(kind.take, h, 1) for _ in range(5)]
    wait_for_waiting(h, 5)
    for step in range(5):
        kind.apply(h, 10 + step, step=step)
    totals = sorted(kind.total(t.result()) for t in takers)
    assert totals == [10.0, 11.0, 12.0, 13.0, 14.0]
