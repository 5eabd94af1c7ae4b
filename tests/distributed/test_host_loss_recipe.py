"""The pieces of the recovery recipe, without a cluster: telling a lost host
from a destroyed accumulator, and retrying the creation while a host restarts."""

from __future__ import annotations

import time

import pytest

from tf_accum import errors
from tf_accum.examples import recovery


def test_a_lost_host_is_told_from_an_accumulator_destroyed_on_purpose() -> None:
    restarted = errors.NotFoundError(
        None, None, "Resource c/n/x does not exist. Its host (container c) was restarted since"
    )
    assert recovery.host_lost(errors.UnavailableError(None, None, "its host process died"))
    assert recovery.host_lost(restarted)
    assert not recovery.host_lost(errors.NotFoundError(None, None, "Resource c/n does not exist."))
    assert not recovery.host_lost(errors.CancelledError(None, None, "closed"))
    assert not recovery.host_lost(ValueError("was restarted"))


def test_remake_retries_while_the_host_restarts_then_returns_what_make_made() -> None:
    calls: list[float] = []

    def make() -> str:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise errors.UnavailableError(None, None, "restarting")
        return "accumulator"

    assert recovery.remake(make, timeout=10.0) == "accumulator"
    assert len(calls) == 3


def test_remake_gives_up_after_its_timeout_and_passes_other_errors_through() -> None:
    def never() -> None:
        raise errors.UnavailableError(None, None, "still restarting")

    start = time.monotonic()
    with pytest.raises(errors.UnavailableError, match="did not come back within 0.5 s"):
        recovery.remake(never, timeout=0.5)
    assert time.monotonic() - start < 5.0

    def refused() -> None:
        raise errors.InvalidArgumentError(None, None, "other attributes")

    with pytest.raises(errors.InvalidArgumentError):
        recovery.remake(refused, timeout=10.0)
