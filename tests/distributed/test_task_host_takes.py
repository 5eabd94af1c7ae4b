"""A TF1 task host's takes wait as attempts in their accumulator's own queue:
the accumulator counts them (waiting, timed out, cancelled), a withdrawn one
consumes nothing, and whoever is behind it goes on. The host class runs in
this process, on an asyncio loop of the test's own (no Ray)."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import numpy as np

import tf_accum as tfa
from tf_accum.distributed.host import _Host
from tf_accum.distributed.steps import MAKE, RAW, VALUE
from tf_accum.distributed.wire import TIMED_OUT, Done, Failure, Request, StepFailed

WAIT = 30.0
CANCELLED = Failure("CancelledError", "TakeGrad operation was cancelled")


class Requests:
    """Requests to one host, as sessions send them (``_Host._run``'s message)."""

    def __init__(self, host: _Host) -> None:
        self.host = host
        self.count = 0

    def send(
        self, steps: list[tuple[Any, ...]], caller: str = "caller", remaining: float | None = None
    ) -> Any:
        """The coroutine of a request; its id is ``self.last``."""
        self.count += 1
        self.last = request = f"{caller}/{self.count}"
        # every step's outputs answered; its takes may go back (a run only fetches them)
        blob = pickle.dumps((steps, (), True))
        message = Request(self.host._instance, "s#1", caller, None, request, blob, [], remaining, 1)
        return self.host._run(message)

    async def make(self) -> int:
        attrs = {"dtype": tfa.int64, "shape": [2], "shared_name": "g", "reduction_type": "SUM"}
        outcome = await self.send([(MAKE, "ConditionalAccumulator", "acc", attrs)])
        assert type(outcome) is Done
        return int(outcome.outputs[0][0])

    async def apply(self, handle: int, gradient: list[int]) -> None:
        names = ("handle", "local_step", "gradient")
        sources = ((VALUE, handle), (VALUE, 0), (VALUE, np.array(gradient, np.int64)))
        outcome = await self.send([(RAW, "AccumulatorApplyGradient", names, {}, sources, 0)])
        assert type(outcome) is Done

    def take(self, handle: int, required: int, **options: Any) -> asyncio.Task[Any]:
        names = ("handle", "num_required")
        sources = ((VALUE, handle), (VALUE, np.int32(required)))
        attrs = {"dtype": tfa.int64, "timeout": None}
        step = (RAW, "AccumulatorTakeGradient", names, attrs, sources, 1)
        return asyncio.ensure_future(self.send([step], **options))

    async def stats(self, handle: int) -> dict[str, Any]:
        return (await self.host.accumulator_report([handle]))[handle]


async def until(condition: Any) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), WAIT)


def test_takes_wait_counted_by_their_accumulator_and_withdrawn_ones_consume_nothing() -> None:
    async def scenario() -> None:
        host = _Host("/job:ps/task:0")
        requests = Requests(host)
        handle = await requests.make()
        await requests.apply(handle, [1, 1])
        first = requests.take(handle, 2)
        first_request = requests.last
        await until(lambda: host._takes_waiting == 1)
        stats = await requests.stats(handle)
        assert stats["waiting"] == 1 and stats["head_num_required"] == 2
        assert (await host.counts())["waiting"] == 1
        # out of time behind the first: withdrawn, counted as timed out
        late = await requests.take(handle, 1, remaining=0.05)
        assert late == StepFailed(0, TIMED_OUT)
        assert (await requests.stats(handle))["takes_timed_out"] == 1
        # a dead caller's take is cancelled
        dead = requests.take(handle, 2, caller="dead")
        behind = requests.take(handle, 1)
        await until(lambda: host._takes_waiting == 3)
        host._caller_died("dead")
        assert await asyncio.wait_for(dead, WAIT) == StepFailed(0, CANCELLED)
        assert not behind.done()  # the first still waits, ahead of it
        # a request's cancellation cancels its take: the one behind takes the round
        await host.cancel(first_request)
        assert await asyncio.wait_for(first, WAIT) == StepFailed(0, CANCELLED)
        outcome = await asyncio.wait_for(behind, WAIT)
        assert type(outcome) is Done
        value, stale, step = outcome.outputs[0]
        assert value.tolist() == [1, 1] and (stale, step) == (0, 1)
        stats = await requests.stats(handle)
        assert stats["takes_cancelled"] == 2 and stats["takes_served"] == 1
        assert stats["waiting"] == 0 and host._takes_waiting == 0

    asyncio.run(scenario())


def test_a_take_waiting_when_its_accumulator_is_destroyed_fails_and_the_host_forgets_it() -> None:
    async def scenario() -> None:
        host = _Host("/job:ps/task:0")
        requests = Requests(host)
        handle = await requests.make()
        waiting = requests.take(handle, 1)
        await until(lambda: host._takes_waiting == 1)
        await host.reset()
        assert await asyncio.wait_for(waiting, WAIT) == StepFailed(0, CANCELLED)
        assert (await host.counts())["waiting"] == 0

    asyncio.run(scenario())


def test_a_request_cancelled_before_it_arrives_takes_only_a_round_ready_at_once() -> None:
    async def scenario() -> None:
        host = _Host("/job:ps/task:0")
        requests = Requests(host)
        handle = await requests.make()
        await requests.apply(handle, [2, 3])
        for required, ready in ((2, False), (1, True)):
            await host.cancel(f"caller/{requests.count + 1}")  # overtakes its request
            outcome = await asyncio.wait_for(requests.take(handle, required), WAIT)
            if ready:  # as a take in one process: a round ready at once is taken
                assert type(outcome) is Done and outcome.outputs[0][0].tolist() == [2, 3]
            else:  # one that would wait is refused, consuming nothing
                assert outcome == StepFailed(0, CANCELLED)
        stats = await requests.stats(handle)
        assert stats["takes_cancelled"] == 1 and stats["takes_served"] == 1
        assert stats["waiting"] == 0 and stats["num_accumulated"] == 0

    asyncio.run(scenario())


def test_a_request_given_back_after_its_answer_puts_its_round_back() -> None:
    """A caller whose run failed after its take's answer came (Ctrl-C as the
    answer arrived) gives the request back: the round goes back into the
    accumulator, counted as interrupted, and the next take gets it whole."""

    async def scenario() -> None:
        host = _Host("/job:ps/task:0")
        requests = Requests(host)
        handle = await requests.make()
        await requests.apply(handle, [2, 3])
        outcome = await asyncio.wait_for(requests.take(handle, 1), WAIT)
        assert type(outcome) is Done and outcome.outputs[0][0].tolist() == [2, 3]
        await host.give_back(requests.last)
        stats = await requests.stats(handle)
        assert stats["num_accumulated"] == 1 and stats["takes_served"] == 0
        assert stats["takes_interrupted"] == 1
        again = await asyncio.wait_for(requests.take(handle, 1), WAIT)
        assert type(again) is Done and again.outputs[0][0].tolist() == [2, 3]
        # given back twice, a request gives its round back once
        await host.give_back(requests.last)
        await host.give_back(requests.last)
        stats = await requests.stats(handle)
        assert stats["num_accumulated"] == 1 and stats["takes_interrupted"] == 2
        # a caller's later request that takes nothing leaves its latest take kept
        await asyncio.wait_for(requests.take(handle, 1), WAIT)
        taken = requests.last
        await requests.apply(handle, [1, 1])  # stale (step 1 > 0), still a request
        await host.give_back(taken)
        stats = await requests.stats(handle)
        assert stats["num_accumulated"] == 1 and stats["takes_interrupted"] == 3

    asyncio.run(scenario())


def test_a_request_given_back_while_it_waits_or_before_it_comes_consumes_nothing() -> None:
    async def scenario() -> None:
        host = _Host("/job:ps/task:0")
        requests = Requests(host)
        handle = await requests.make()
        # waiting: cancelled, consumes nothing
        waiting = requests.take(handle, 1)
        await until(lambda: host._takes_waiting == 1)
        await host.give_back(requests.last)
        assert await asyncio.wait_for(waiting, WAIT) == StepFailed(0, CANCELLED)
        # given back before it came: a round ready at once is served, then goes back
        await requests.apply(handle, [4, 5])
        await host.give_back(f"caller/{requests.count + 1}")
        outcome = await asyncio.wait_for(requests.take(handle, 1), WAIT)
        assert type(outcome) is Done
        stats = await requests.stats(handle)
        assert stats["num_accumulated"] == 1 and stats["takes_served"] == 0
        assert stats["takes_interrupted"] == 1 and stats["waiting"] == 0
        assert not host._abandoned and not host._early_cancels

    asyncio.run(scenario())
