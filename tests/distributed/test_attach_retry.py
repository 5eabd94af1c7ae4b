"""Attaching over ``ray://`` tries again when Ray's client proxy fails to start the
client's server (a race inside Ray), and only then."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

# the module (tf_accum.distributed.connect is also the name of its function)
connect = importlib.import_module("tf_accum.distributed.connect")

# The tracebacks Ray's proxy sends back when its start of a client's server failed
# (shortened): the server process ended at once, or had ended when the proxy read it.
START_FAILED = (
    "Initialization failure from server:\nTraceback (most recent call last):\n"
    '  File "proxier.py", line 770, in Datapath\n'
    "RuntimeError: Starting Ray client server failed. See ray_client_server_23001.err"
)
PROCESS_GONE = (
    "Initialization failure from server:\nTraceback (most recent call last):\n"
    '  File "proxier.py", line 396, in start_specific_server\n'
    "    cmd = psutil_proc.cmdline()\n"
    "psutil.ZombieProcess: PID still exists but it's a zombie (pid=4242)"
)


class FakeRay:
    """``ray.init`` failing with the given errors, then succeeding."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls: list[str] = []

    def init(self, address: str, **options: Any) -> None:
        self.calls.append(address)
        if self.failures:
            raise self.failures.pop(0)


@pytest.mark.parametrize("message", [START_FAILED, PROCESS_GONE])
def test_a_failed_start_of_the_clients_server_is_tried_again(message: str) -> None:
    ray = FakeRay(ConnectionAbortedError(message), ConnectionAbortedError(message))
    connect._init_retrying(ray, "ray://127.0.0.1:10001", {}, 10.0)
    assert ray.calls == ["ray://127.0.0.1:10001"] * 3


def test_the_tries_are_bounded() -> None:
    failures = [ConnectionAbortedError(PROCESS_GONE)] * (connect.PROXY_START_TRIES + 1)
    ray = FakeRay(*failures)
    with pytest.raises(ConnectionAbortedError, match="ZombieProcess"):
        connect._init_retrying(ray, "ray://127.0.0.1:10001", {}, 10.0)
    assert len(ray.calls) == connect.PROXY_START_TRIES


@pytest.mark.parametrize(
    "failure",
    [
        ConnectionAbortedError("Initialization failure from server:\nValueError: bad option"),
        ConnectionError("Failed to connect to the cluster"),
        RuntimeError("Starting Ray client server failed"),  # not the proxy's answer
    ],
)
def test_other_failures_are_not_tried_again(failure: BaseException) -> None:
    ray = FakeRay(failure)
    with pytest.raises(type(failure)):
        connect._init_retrying(ray, "ray://127.0.0.1:10001", {}, 10.0)
    assert len(ray.calls) == 1
