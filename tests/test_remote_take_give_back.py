"""A remote take's round goes back to its host whenever the caller is
interrupted before the program has it, checked against a recording stand-in
for the host link (no Ray): the host ignores a give-back of a round it did
not deliver, so the client asks whenever it cannot know."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tf_accum import errors
from tf_accum.accumulators import interrupts
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed.proxy import RemoteAccumulator


class _Link:
    """Records what the client asks of its host; ``fail`` says which step raises."""

    instance, caller, life = "instance", "caller", None

    def __init__(self, submit_fails: bool = False, result_fails: int = 0) -> None:
        self.submit_fails = submit_fails
        self.result_fails = result_fails  # calls to result() that raise
        self.asked: list[tuple[str, str]] = []

    def new_attempt(self) -> str:
        return "attempt-1"

    def buffer(self, nbytes: int) -> None:
        return None

    def submit(self, method: str, *args: Any) -> str:
        if self.submit_fails:
            raise KeyboardInterrupt
        return "call"

    def result(self, call: Any, timeout: float | None = None) -> Any:
        if self.result_fails:
            self.result_fails -= 1
            if timeout is None:
                raise KeyboardInterrupt
            raise errors.UnavailableError(None, None, "the host did not answer in time")
        return np.ones(2, np.float32)

    def withdraw(self, attempt: str, reason: str) -> None:
        self.asked.append(("withdraw", attempt))

    def give_back(self, attempt: str) -> None:
        self.asked.append(("give_back", attempt))


def _remote(link: _Link) -> RemoteAccumulator:
    spec = AccumulatorSpec("dense", tfa.float32, (2,), "MEAN")
    return RemoteAccumulator(link, 1, spec, "remote")  # type: ignore[arg-type]


def test_interrupted_while_submitting_the_take_it_is_withdrawn_and_given_back() -> None:
    link = _Link(submit_fails=True)
    with pytest.raises(KeyboardInterrupt):
        _remote(link).take(1)
    assert link.asked == [("withdraw", "attempt-1"), ("give_back", "attempt-1")]


def test_interrupted_while_waiting_with_the_host_silent_the_round_is_given_back() -> None:
    link = _Link(result_fails=2)  # the wait, then the grace for the host's answer
    with pytest.raises(KeyboardInterrupt):
        _remote(link).take(1)
    assert link.asked == [("withdraw", "attempt-1"), ("give_back", "attempt-1")]


def test_a_returned_remote_take_goes_back_when_the_public_call_fails_after_it() -> None:
    link = _Link()
    taken = interrupts.open_delivery()
    try:
        np.testing.assert_array_equal(_remote(link).take(1), np.ones(2, np.float32))
        assert link.asked == []
    finally:
        interrupts.give_back(taken)
    assert link.asked == [("give_back", "attempt-1")]
