"""A TF1 task host's takes wait as attempts in their accumulator's own queue:
the accumulator counts them (waiting, timed out, cancelled), a withdrawn one
consumes nothing, and whoever is behind it goes on. The host class runs in
this process, its calls on threads of the test's own holding its lock, as
``ResourceHost`` runs them on Ray's (no Ray)."""

from __future__ import annotations

import concurrent.futures
import pickle
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tf_accum.distributed import host as host_module
from tf_accum.distributed.host import _Host
from tf_accum.distributed.steps import MAKE, RAW, VALUE
from tf_accum.distributed.wire import TIMED_OUT, Done, Failure, Request, StepFailed

WAIT = 30.0
CANCELLED = Failure("CancelledError", "TakeGrad operation was cancelled")


class Requests:
    """Requests to one host, as sessions send them (``_Host._run``'s message)."""

    def __init__(self, host: _Host, pool: concurrent.futures.ThreadPoolExecutor) -> None:
        self.host = host
        self.pool = pool
        self.count = 0

    def call(self, method: Callable[..., Any], *arguments: Any) -> Any:
        """``method`` of the host, holding its lock (as each call of ``ResourceHost``)."""
        with self.host.lock:
            return method(*arguments)

    def send(
        self, steps: list[tuple[Any, ...]], caller: str = "caller", remaining: float = WAIT
    ) -> concurrent.futures.Future[Any]:
        """A request, sent on a thread of its own; its id is ``self.last``. Its run's
        deadline is ``remaining`` seconds away (a test that fails ends its waits)."""
        self.count += 1
        self.last = request = f"{caller}/{self.count}"
        # every step's outputs answered; its takes may go back (a run only fetches them)
        blob = pickle.dumps((steps, (), True))
        message = Request(self.host._instance, "s#1", caller, None, request, blob, [], remaining, 1)
        return self.pool.submit(self.call, self.host.run, message)

    def make(self) -> int:
        attrs = {"dtype": tfa.int64, "shape": [2], "shared_name": "g", "reduction_type": "SUM"}
        outcome = self.send([(MAKE, "ConditionalAccumulator", "acc", attrs)]).result(WAIT)
        assert type(outcome) is Done
        return int(outcome.outputs[0][0])

    def apply(self, handle: int, gradient: list[int], local_step: int = 0) -> None:
        names = ("handle", "local_step", "gradient")
        sources = ((VALUE, handle), (VALUE, local_step), (VALUE, np.array(gradient, np.int64)))
        step: tuple[Any, ...] = (RAW, "AccumulatorApplyGradient", names, {}, sources, 0)
        assert type(self.send([step]).result(WAIT)) is Done

    def take(self, handle: int, required: int, **options: Any) -> concurrent.futures.Future[Any]:
        names = ("handle", "num_required")
        sources = ((VALUE, handle), (VALUE, np.int32(required)))
        attrs = {"dtype": tfa.int64, "timeout": None}
        step = (RAW, "AccumulatorTakeGradient", names, attrs, sources, 1)
        return self.send([step], **options)

    def waiting_take(
        self, handle: int, required: int = 1, **options: Any
    ) -> concurrent.futures.Future[Any]:
        """A take that waits: returned once the host counts it as waiting."""
        before = self.host._takes_waiting
        found = self.take(handle, required, **options)
        until(lambda: self.host._takes_waiting > before)
        return found

    def stats(self, handle: int) -> dict[str, Any]:
        found: dict[str, Any] = self.call(self.host.accumulator_report, [handle])[handle]
        return found


@pytest.fixture
def requests() -> Iterator[Requests]:
    """Requests to a ps task's host, sent from a pool of threads."""
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        yield Requests(_Host("/job:ps/task:0"), pool)


def until(condition: Callable[[], bool]) -> None:
    give_up = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < give_up, "the condition never held"
        time.sleep(0.01)


def test_takes_wait_counted_by_their_accumulator_and_withdrawn_ones_consume_nothing(
    requests: Requests,
) -> None:
    host = requests.host
    handle = requests.make()
    requests.apply(handle, [1, 1])
    first = requests.waiting_take(handle, 2)
    first_request = requests.last
    stats = requests.stats(handle)
    assert stats["waiting"] == 1 and stats["head_num_required"] == 2
    assert requests.call(host.counts)["waiting"] == 1
    # out of time behind the first: withdrawn, counted as timed out
    late = requests.take(handle, 1, remaining=0.05).result(WAIT)
    assert late == StepFailed(0, TIMED_OUT)
    assert (requests.stats(handle))["takes_timed_out"] == 1
    # a dead caller's take is cancelled
    dead = requests.waiting_take(handle, 2, caller="dead")
    behind = requests.waiting_take(handle, 1)
    requests.call(host._caller_died, "dead")
    assert dead.result(WAIT) == StepFailed(0, CANCELLED)
    assert not behind.done()  # the first still waits, ahead of it
    # a request's cancellation cancels its take: the one behind takes the round
    requests.call(host.cancel, first_request)
    assert first.result(WAIT) == StepFailed(0, CANCELLED)
    outcome = behind.result(WAIT)
    assert type(outcome) is Done
    value, stale, step = outcome.outputs[0]
    assert value.tolist() == [1, 1] and (stale, step) == (0, 1)
    stats = requests.stats(handle)
    assert stats["takes_cancelled"] == 2 and stats["takes_served"] == 1
    assert stats["waiting"] == 0 and host._takes_waiting == 0


def test_a_take_waiting_when_its_accumulator_is_destroyed_fails_and_the_host_forgets_it(
    requests: Requests,
) -> None:
    host = requests.host
    waiting = requests.waiting_take(requests.make())
    requests.call(host.reset)
    assert waiting.result(WAIT) == StepFailed(0, CANCELLED)
    assert requests.call(host.counts)["waiting"] == 0


def test_a_request_cancelled_before_it_arrives_takes_only_a_round_ready_at_once(
    requests: Requests,
) -> None:
    host = requests.host
    handle = requests.make()
    requests.apply(handle, [2, 3])
    for required, ready in ((2, False), (1, True)):
        requests.call(host.cancel, f"caller/{requests.count + 1}")  # overtakes its request
        outcome = requests.take(handle, required).result(WAIT)
        if ready:  # as a take in one process: a round ready at once is taken
            assert type(outcome) is Done and outcome.outputs[0][0].tolist() == [2, 3]
        else:  # one that would wait is refused, consuming nothing
            assert outcome == StepFailed(0, CANCELLED)
    stats = requests.stats(handle)
    assert stats["takes_cancelled"] == 1 and stats["takes_served"] == 1
    assert stats["waiting"] == 0 and stats["num_accumulated"] == 0


def test_a_request_given_back_after_its_answer_puts_its_round_back(
    requests: Requests,
) -> None:
    """A caller whose run failed after its take's answer came (Ctrl-C as the
    answer arrived) gives the request back: the round goes back into the
    accumulator, counted as interrupted, and the next take gets it whole."""

    host = requests.host
    handle = requests.make()
    requests.apply(handle, [2, 3])
    outcome = requests.take(handle, 1).result(WAIT)
    assert type(outcome) is Done and outcome.outputs[0][0].tolist() == [2, 3]
    requests.call(host.give_back, requests.last)
    stats = requests.stats(handle)
    assert stats["num_accumulated"] == 1 and stats["takes_served"] == 0
    assert stats["takes_interrupted"] == 1
    again = requests.take(handle, 1).result(WAIT)
    assert type(again) is Done and again.outputs[0][0].tolist() == [2, 3]
    # given back twice, a request gives its round back once
    requests.call(host.give_back, requests.last)
    requests.call(host.give_back, requests.last)
    stats = requests.stats(handle)
    assert stats["num_accumulated"] == 1 and stats["takes_interrupted"] == 2
    # a caller's later request that takes nothing leaves its latest take kept
    requests.take(handle, 1).result(WAIT)
    taken = requests.last
    requests.apply(handle, [1, 1])  # stale (step 1 > 0), still a request
    requests.call(host.give_back, taken)
    stats = requests.stats(handle)
    assert stats["num_accumulated"] == 1 and stats["takes_interrupted"] == 3


def test_a_request_given_back_while_it_waits_or_before_it_comes_consumes_nothing(
    requests: Requests,
) -> None:
    host = requests.host
    handle = requests.make()
    # waiting: cancelled, consumes nothing
    waiting = requests.waiting_take(handle)
    requests.call(host.give_back, requests.last)
    assert waiting.result(WAIT) == StepFailed(0, CANCELLED)
    # given back before it came: a round ready at once is served, then goes back
    requests.apply(handle, [4, 5])
    requests.call(host.give_back, f"caller/{requests.count + 1}")
    outcome = requests.take(handle, 1).result(WAIT)
    assert type(outcome) is Done
    stats = requests.stats(handle)
    assert stats["num_accumulated"] == 1 and stats["takes_served"] == 0
    assert stats["takes_interrupted"] == 1 and stats["waiting"] == 0
    assert not host._abandoned and not host._early_cancels


def test_a_take_past_the_most_that_may_wait_is_refused_and_consumes_nothing(
    requests: Requests, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each waiting call holds one of the host actor's threads: past the most
    that may wait at once, a take that would wait is refused with
    ResourceExhaustedError saying why, rather than leaving no thread for the
    applies that would serve the others. A take served at once still is."""
    monkeypatch.setattr(host_module, "MOST_WAITING", 2)
    host = requests.host
    handle = requests.make()
    waiting = [requests.waiting_take(handle) for _ in range(2)]
    refused = requests.take(handle, 1).result(WAIT)
    assert type(refused) is StepFailed and refused.failure.kind == "ResourceExhaustedError"
    assert "2 calls already wait" in refused.failure.message, refused.failure.message
    assert requests.stats(handle)["waiting"] == 2
    for step, gradient in enumerate(([1, 2], [3, 4])):  # each take moves the global step on
        requests.apply(handle, gradient, local_step=step)
        assert waiting[step].result(WAIT).outputs[0][0].tolist() == gradient
    requests.apply(handle, [5, 6], local_step=2)
    until(lambda: host._waits == 0)
    # nothing waits: one more take served at once, the round whole
    outcome = requests.take(handle, 1).result(WAIT)
    assert type(outcome) is Done and outcome.outputs[0][0].tolist() == [5, 6]
