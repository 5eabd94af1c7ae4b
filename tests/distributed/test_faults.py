"""Faults with real processes: killed workers, chiefs and hosts; an unreachable cluster."""

from __future__ import annotations

import os
import signal
import socket
import time

import numpy as np
import pytest

import tf_accum as tfa
from tests.distributed.conftest import PROCESS_WAIT, ROOT, run_python
from tests.distributed.roles import shared
from tests.distributed.test_cross_process import apply, num, take, unique
from tests.helpers import Background, wait_for_waiting, wait_until
from tf_accum import errors
from tf_accum.examples.processes import descendants

raw = tfa.raw_ops
DETECT = 30.0  # seconds; Ray notices a dead process within a few


def test_a_worker_killed_mid_apply_applies_all_or_nothing(ray_table, spawn) -> None:
    name, size = unique("killed-worker"), 1_000_000
    h = shared(name, size=size, dtype=tfa.float32)
    worker = spawn("apply_forever", name=name, size=size)
    wait_until(lambda: num(h) >= 3, timeout=PROCESS_WAIT)
    worker.kill()  # somewhere in the middle of sending a 4 MB gradient
    settled = [-1, num(h)]
    while settled[-1] != settled[-2]:  # an apply already in the host may still land
        time.sleep(0.5)
        settled.append(num(h))
    count = settled[-1]
    total = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=count, dtype=tfa.float32)
    assert total.shape == (size,) and total.dtype == np.float32
    # every element saw the same gradients: none was applied in part
    assert np.all(total == count)


def test_a_chief_killed_while_its_take_waits_consumes_nothing(ray_table, spawn) -> None:
    name = unique("killed-chief")
    h = shared(name)
    chief = spawn("take", name=name, num_required=1)
    wait_for_waiting(h, 1)
    chief.kill()
    wait_until(lambda: ray_table.lookup(h).num_waiting() == 0, timeout=DETECT)
    apply(h, [5, 1])
    assert num(h) == 1  # the dead chief's attempt did not take the round
    assert take(h, 1).tolist() == [5, 1]


def test_a_dead_process_leaves_nothing_behind_in_the_host(ray_table, spawn) -> None:
    import ray

    from tf_accum.distributed.wire import NAMESPACE, host_name

    shared(unique("counts"))  # the default container's host runs
    host = ray.get_actor(host_name("localhost"), namespace=NAMESPACE)

    def held() -> tuple[int, int]:
        counts = ray.get(host.counts.remote())
        return counts["accumulators"], counts["buffers"]

    accumulators, buffers = held()
    owner = spawn("hold_private", size=300_000)
    wait_until(lambda: held() == (accumulators + 1, buffers + 1), timeout=PROCESS_WAIT)
    owner.kill()
    # its private accumulator and its shared-memory buffer go with it
    wait_until(lambda: held() == (accumulators, buffers), timeout=DETECT)


def test_a_killed_host_fails_waiting_takes_and_restarts_empty(ray_table) -> None:
    import ray

    from tf_accum.distributed.wire import NAMESPACE, host_name

    container, name = unique("killed-host"), unique("acc")

    def create() -> int:
        return raw.ResourceConditionalAccumulator(
            dtype=tfa.int64, shape=[2], container=container, shared_name=name, reduction_type="SUM"
        )

    h = create()
    apply(h, [1, 1])
    waiting = Background(take, h, 2)
    wait_for_waiting(h, 1)
    host = ray.get_actor(host_name(container), namespace=NAMESPACE)
    _, pid, _ = ray.get(host.ping.remote())
    os.kill(pid, signal.SIGKILL)
    error = waiting.error(timeout=DETECT)
    assert isinstance(error, errors.UnavailableError), repr(error)
    assert f"container {container}" in str(error) and "lost" in str(error)

    def says_gone() -> bool:
        try:
            num(h)
        except errors.UnavailableError:
            return False  # still restarting
        except errors.NotFoundError as gone:
            assert f"Resource {container}/{name}/" in str(gone) and "restarted" in str(gone)
            return True
        raise AssertionError("a call on an accumulator of a killed host succeeded")

    wait_until(says_gone, timeout=DETECT)
    fresh = create()
    assert fresh != h and num(fresh) == 0  # the restarted host starts empty
    apply(fresh, [2, 1])
    assert take(fresh, 1).tolist() == [2, 1]
    with pytest.raises(errors.NotFoundError):
        apply(h, [1, 1])
    ray.kill(host, no_restart=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_cluster_fails_clearly_and_quickly() -> None:
    address = f"127.0.0.1:{_free_port()}"
    code = (
        "import tf_accum as tfa\n"
        "for attempt in ("
        f"lambda: tfa.distributed.connect({address!r}),"
        "lambda: tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])):\n"
        "    try:\n"
        "        attempt()\n"
        "    except tfa.errors.UnavailableError as e:\n"
        "        print('Unavailable:', e)\n"
    )
    done = run_python(code, dict(os.environ, PYTHONPATH=str(ROOT), TF_ACCUM_RAY_ADDRESS=address))
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    for line in lines:
        assert line.startswith(f"Unavailable: No Ray cluster answers at {address!r}")


def test_an_address_where_no_ray_cluster_answers_fails_within_the_timeout() -> None:
    code = (
        "import socket, tf_accum as tfa\n"
        "listener = socket.create_server(('127.0.0.1', 0))  # accepts, never speaks\n"
        "address = '127.0.0.1:%d' % listener.getsockname()[1]\n"
        "try:\n"
        "    tfa.distributed.connect(address, timeout=2)\n"
        "except tfa.errors.UnavailableError as e:\n"
        "    print(str(e).replace(address, 'ADDRESS'))\n"
    )
    done = run_python(code, dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.stdout.startswith(
        "Something listens at 'ADDRESS', but no Ray cluster answered within 2 s"
    ), done.stdout + done.stderr[-2000:]


def _listening_inodes() -> dict[int, str]:
    """inode -> hex local address of every listening TCP socket."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    found[int(fields[9])] = fields[1].split(":")[0]
    return found


LOOPBACK = {
    "0100007F",  # 127.0.0.1
    "0000000000000000FFFF00000100007F",  # ::ffff:127.0.0.1
    "00000000000000000000000001000000",  # ::1
}


def _cluster_processes() -> set[int]:
    """The processes of the cluster this process started (Ray's, and what they
    started), without the test session's background jobs: a live TensorFlow job's
    gRPC servers listen on every interface, as TensorFlow's do."""
    found = set()
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:
            continue
        if any(b"ray" in word for word in words[:2]):
            found |= {pid} | descendants(pid)
    return found


def test_everything_the_cluster_starts_listens_on_loopback_only(ray_table) -> None:
    shared(unique("listen"))  # make sure a host actor runs
    listening = _listening_inodes()
    seen = {}
    for pid in _cluster_processes():
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        for link in links:
            if link.startswith("socket:["):
                inode = int(link[8:-1])
                if inode in listening:
                    seen[inode] = listening[inode]
    assert len(seen) >= 3  # GCS, raylet, workers
    assert set(seen.values()) <= LOOPBACK, seen


def test_a_process_with_the_wrong_token_is_refused(ray_cluster) -> None:
    code = (
        "import tf_accum as tfa\n"
        "try:\n"
        f"    tfa.distributed.connect({ray_cluster.address!r})\n"
        "except tfa.errors.UnauthenticatedError as e:\n"
        "    print('Unauthenticated:', e)\n"
    )
    done = run_python(code, ray_cluster.env(RAY_AUTH_TOKEN="0" * 64))
    assert done.stdout.startswith(
        f"Unauthenticated: The Ray cluster at {ray_cluster.address!r} refused this process's token"
    ), done.stdout + done.stderr[-2000:]


def test_the_host_runs_only_accumulator_operations(ray_table) -> None:
    import ray

    from tf_accum.distributed.wire import NAMESPACE, Failure, host_name

    h = shared(unique("operations"))
    apply(h, [1, 2])
    host = ray.get_actor(host_name("localhost"), namespace=NAMESPACE)
    # a method that is not an operation (here the life token, which never returns)
    refused = ray.get(host.run.remote(("hold", "someone")), timeout=PROCESS_WAIT)
    assert type(refused) is Failure and refused.kind == "InternalError"
    assert "'hold'" in refused.message
    accumulator = ray_table.lookup(h)
    link = accumulator.link
    count = ray.get(
        host.run.remote(("num_accumulated", link.instance, accumulator.entry_id)),
        timeout=PROCESS_WAIT,
    )
    assert count == num(h) == 1


class _UnreachableHost:
    """An actor handle whose calls Ray refuses at once (as for a dead actor)."""

    class _Method:
        def __init__(self, refuse: bool) -> None:
            self.refuse = refuse

        def remote(self, *args: object) -> object:
            import ray

            if self.refuse:
                raise ray.exceptions.RayActorError()
            return "life token"

    hold = _Method(refuse=False)
    run = _Method(refuse=True)


def test_withdrawing_from_an_unreachable_host_cancels_the_other_takes() -> None:
    """A withdrawal is a cancellation callback (and runs while an interrupt is
    handled): a host that cannot be called must not stop the other callbacks."""
    from tf_accum.accumulators.attempts import Cancellation
    from tf_accum.distributed.proxy import HostLink

    link = HostLink("c", _UnreachableHost(), "instance", "caller", same_machine=False)
    cancellation = Cancellation()
    seen: list[str] = []
    cancellation.register(lambda _error: link.withdraw(link.new_attempt(), "cancelled"))
    cancellation.register(lambda error: seen.append(error.message))
    assert cancellation.cancel(errors.CancelledError(None, None, "closed"))
    assert seen == ["closed"]
    assert link.stale  # the next call finds the host anew
    with pytest.raises(errors.UnavailableError, match="host process died"):
        link.submit("num_accumulated", "instance", 1)
