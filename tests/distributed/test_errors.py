"""Clear errors within a bound: tokens, a dead ``ray://`` process's take, placements.

On the session cluster, with a Ray Client server and (for a gone node) an
extra raylet started here and ended by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.conftest import PROCESS_WAIT, ROOT, Cluster, run_python
from tests.distributed.roles import shared
from tests.distributed.test_cross_process import apply, num, take, unique
from tests.helpers import wait_until
from tf_accum import errors
from tf_accum.examples.processes import descendants

TOKEN_BOUND = 5.0  # seconds: the bound for a refused token
WITHDRAW_BOUND = 5.0  # seconds: a dead process's take is withdrawn within it
PLACEMENT_BOUND = 10.0  # seconds: an unplaceable host is reported within it


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def client_address(ray_cluster: Cluster) -> Iterator[str]:
    """A Ray Client server (``ray://``) on loopback for the session cluster; ended by pid."""
    import ray

    node: Any = ray._private.worker._global_node
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "ray.util.client.server",
        f"--address={ray_cluster.address}",
        "--host=127.0.0.1",
        f"--port={port}",
        "--mode=proxy",
        f"--runtime-env-agent-address={node.runtime_env_agent_address}",
        f"--node-id={node.node_id}",
    ]
    server = subprocess.Popen(
        command,
        cwd=ROOT,
        env=ray_cluster.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _listening(port), timeout=PROCESS_WAIT)
        yield f"ray://127.0.0.1:{port}"
    finally:
        for pid in descendants(server.pid) | {server.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        server.wait(PROCESS_WAIT)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


ATTEMPT = (
    "import time, tf_accum as tfa\n"
    "start = time.monotonic()\n"
    "try:\n"
    "    tfa.distributed.connect({address!r})\n"
    "    print('attached')\n"
    "except tfa.errors.OpError as e:\n"
    "    print(type(e).__name__, round(time.monotonic() - start, 2), e)\n"
)


def _attempt(address: str, env: dict[str, str]) -> tuple[str, float, str]:
    done = run_python(ATTEMPT.format(address=address), env)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, done.stderr[-3000:]
    kind, seconds, message = [*lines[-1].split(" ", 2), "", ""][:3]
    assert kind != "attached", done.stdout
    return kind, float(seconds), message


@pytest.fixture
def addresses(ray_cluster: Cluster, client_address: str) -> dict[str, str]:
    return {"gcs": ray_cluster.address, "client": client_address}


def _env(cluster: Cluster, home: Path, **settings: str) -> dict[str, str]:
    """No Ray setting but ``settings`` (none of what this process's attach set either)."""
    env = cluster.env(HOME=str(home), **settings)
    for name in list(env):
        if (name.startswith("RAY_") or name == "TF_ACCUM_RAY_ADDRESS") and name not in settings:
            del env[name]
    return env


@pytest.mark.parametrize("kind", ["gcs", "client"])
def test_a_wrong_token_is_refused_quickly_and_says_wrong(ray_cluster, addresses, kind, tmp_path):
    address = addresses[kind]
    env = _env(ray_cluster, tmp_path, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="0" * 64)
    error, seconds, message = _attempt(address, env)
    assert error == "UnauthenticatedError", message
    assert f"The Ray cluster at {address!r} refused this process's token (wrong token)" in message
    assert seconds < TOKEN_BOUND


@pytest.mark.parametrize("kind", ["gcs", "client"])
def test_token_mode_without_a_token_says_missing(ray_cluster, addresses, kind, tmp_path):
    address = addresses[kind]
    env = _env(ray_cluster, tmp_path, RAY_AUTH_MODE="token")  # an empty home: no token file
    error, seconds, message = _attempt(address, env)
    assert error == "UnauthenticatedError", message
    assert "no Ray token (missing)" in message and "RAY_AUTH_MODE=token is set" in message
    assert "refused" not in message and address in message
    assert seconds < TOKEN_BOUND


@pytest.mark.parametrize("kind", ["gcs", "client"])
def test_no_token_where_the_cluster_demands_one_says_missing(
    ray_cluster, addresses, kind, tmp_path
):
    address = addresses[kind]
    error, seconds, message = _attempt(address, _env(ray_cluster, tmp_path))
    assert error == "UnauthenticatedError", message
    assert f"The Ray cluster at {address!r} requires a token and this process has none" in message
    assert "(missing)" in message
    assert seconds < TOKEN_BOUND


@pytest.mark.parametrize("kind", ["gcs", "client"])
def test_a_home_token_ray_does_not_present_says_missing_and_why(
    ray_cluster, addresses, kind, tmp_path
):
    """The cluster's own token in ``~/.ray/auth_token``, RAY_AUTH_MODE unset: Ray
    presents no token to an address it is given, so the cluster refuses."""
    address = addresses[kind]
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(os.environ["RAY_AUTH_TOKEN"])
    error, seconds, message = _attempt(address, _env(ray_cluster, tmp_path))
    assert error == "UnauthenticatedError", message
    assert f"The Ray cluster at {address!r} requires a token and this process presents none" in (
        message
    )
    assert "it has one, in ~/.ray/auth_token" in message
    assert message.endswith("run it with RAY_AUTH_MODE=token")
    assert seconds < TOKEN_BOUND


def _client_server_logs(cluster: Cluster) -> str:
    """The tails of the Ray Client servers' error logs (what Ray's message points to)."""
    logs = sorted(Path(cluster.temp_dir).glob("session_*/logs/ray_client_server*.err"))
    return "".join(f"\n--- {log.name}\n{log.read_text(errors='replace')[-2000:]}" for log in logs)


def test_the_right_token_over_ray_client_attaches(ray_cluster, client_address):
    # (connect tries again when Ray's proxy fails to start this client's server)
    done = run_python(ATTEMPT.format(address=client_address), ray_cluster.env())
    assert done.stdout.strip().splitlines()[-1:] == ["attached"], (
        done.stdout + done.stderr[-3000:] + _client_server_logs(ray_cluster)
    )


def test_a_dead_ray_client_process_has_its_take_withdrawn_within_the_bound(
    ray_table, client_address
):
    name = unique("dead-client")
    h = shared(name)
    arguments = json.dumps({"name": name, "num_required": 1})
    env = dict(os.environ, TF_ACCUM_RAY_ADDRESS=client_address, PYTHONPATH=str(ROOT))
    env.pop("RAY_CLIENT_RECONNECT_GRACE_PERIOD", None)  # tf_accum's own bound applies

    def waiting_or_ended() -> bool:
        return ray_table.lookup(h).num_waiting() == 1 or taker.poll() is not None

    taker = subprocess.Popen(
        [sys.executable, "-m", "tests.distributed.roles", "take", arguments],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(waiting_or_ended, timeout=PROCESS_WAIT)
        assert taker.poll() is None, taker.communicate()[1][-3000:]
        os.kill(taker.pid, signal.SIGKILL)
        taker.wait(PROCESS_WAIT)
        killed = time.monotonic()
        wait_until(lambda: ray_table.lookup(h).num_waiting() == 0, timeout=PROCESS_WAIT)
        assert time.monotonic() - killed < WITHDRAW_BOUND
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(taker.pid, signal.SIGKILL)
        taker.communicate(timeout=PROCESS_WAIT)
    apply(h, [5, 1])
    assert num(h) == 1  # the dead process's take did not consume the round
    assert take(h, 1).tolist() == [5, 1]


def _host(options: dict[str, Any], container: str) -> tuple[Any, dict[str, Any]]:
    """A host actor made as the table makes one, with ``options`` added."""
    from tf_accum.distributed.host import remote_class
    from tf_accum.distributed.wire import NAMESPACE, host_name

    options = {
        "num_cpus": 0,
        "max_restarts": 0,
        **options,
        "name": host_name(container),
        "namespace": NAMESPACE,
    }
    return remote_class().options(**options).remote(container), options


def _unplaceable(ray_table, options: dict[str, Any]) -> tuple[errors.OpError, float]:
    import ray

    from tf_accum.distributed.feasibility import wait_started

    container = unique("unplaceable")
    actor, options = _host(options, container)
    start = time.monotonic()
    try:
        with pytest.raises(errors.OpError) as caught:
            wait_started(actor.ping.remote(), options, f"the host of {container}", 60.0)
    finally:
        ray.kill(actor, no_restart=True)
    return caught.value, time.monotonic() - start


def test_a_resource_no_node_offers_is_reported_within_the_bound(ray_table) -> None:
    error, seconds = _unplaceable(ray_table, {"resources": {"ps_nowhere": 1}})
    assert type(error) is errors.InvalidArgumentError, repr(error)
    assert "cannot be placed" in error.message and "'ps_nowhere': 1.0" in error.message
    assert "live nodes:" in error.message
    assert seconds < PLACEMENT_BOUND


def test_a_pin_to_an_unknown_node_is_reported_within_the_bound(ray_table) -> None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    missing = "ab" * 28
    strategy = NodeAffinitySchedulingStrategy(node_id=missing, soft=False)
    error, seconds = _unplaceable(ray_table, {"scheduling_strategy": strategy})
    assert type(error) is errors.UnavailableError, repr(error)
    assert f"node {missing}, which the cluster does not know" in error.message
    assert seconds < PLACEMENT_BOUND


def test_a_host_the_cluster_cannot_place_fails_its_start_within_the_bound(ray_table) -> None:
    """The path every host takes when it is first made (tf_accum/distributed/placement.py)."""
    import ray

    from tf_accum.distributed.host import remote_class
    from tf_accum.distributed.placement import start_host
    from tf_accum.distributed.wire import host_name

    container = unique("unplaceable-start")
    start = time.monotonic()
    with pytest.raises(errors.InvalidArgumentError, match="cannot be placed") as caught:
        start_host(
            remote_class(), host_name(container), (container,),
            {"resources": {"ps_nowhere": 1}, "max_restarts": 0}, f"the host of {container}",
        )  # fmt: skip
    assert time.monotonic() - start < PLACEMENT_BOUND
    assert "'ps_nowhere': 1.0" in caught.value.message
    with contextlib.suppress(ValueError):
        ray.kill(ray.get_actor(host_name(container), namespace="tf_accum"), no_restart=True)


@contextlib.contextmanager
def extra_node(
    cluster: Cluster, num_cpus: int = 0, temp_dir: str | None = None, **resources: float
) -> Iterator[tuple[str, Any]]:
    """A second raylet on the session cluster: its node id and Ray's Node; ended by pid.

    With ``temp_dir`` (a directory of its own), a driver that attaches with that
    ``_temp_dir`` connects to this raylet rather than to the head's."""
    import ray
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    before = {node["NodeID"] for node in ray.nodes()}
    params = RayParams(
        gcs_address=cluster.address,
        node_ip_address="127.0.0.1",
        num_cpus=num_cpus,
        resources=dict(resources),
        object_store_memory=80 * 2**20,
        min_worker_port=0,
        max_worker_port=0,
        node_manager_port=0,
        temp_dir=temp_dir or cluster.temp_dir,
    )
    params.dashboard_agent_listen_port = None
    params.include_log_monitor = False  # type: ignore[assignment]  # the head runs the one log monitor
    mine = descendants(os.getpid())
    node = Node(params, head=False, shutdown_at_exit=False, spawn_reaper=False)
    started = descendants(os.getpid()) - mine  # the extra node's processes
    node_id = ""
    try:
        wait_until(lambda: len({n["NodeID"] for n in ray.nodes()} - before) == 1, PROCESS_WAIT)
        (node_id,) = {n["NodeID"] for n in ray.nodes()} - before
        yield node_id, node
    finally:
        for pid in list(started):
            started |= descendants(pid)
        # a raylet ended gracefully leaves the cluster at once (a killed one stays
        # listed alive until its heartbeats are missed, and Ray may place work there)
        node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(
            lambda: not any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()),
            PROCESS_WAIT,
        )


def test_a_pin_to_a_node_that_is_gone_names_the_node_within_the_bound(ray_cluster, ray_table):
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    with extra_node(ray_cluster) as (node_id, node):
        node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
        wait_until(
            lambda: not any(n["Alive"] for n in ray.nodes() if n["NodeID"] == node_id),
            timeout=PROCESS_WAIT,
        )
    strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
    error, seconds = _unplaceable(ray_table, {"scheduling_strategy": strategy})
    assert type(error) is errors.UnavailableError, repr(error)
    assert f"node {node_id} (127.0.0.1), which is gone (dead)" in error.message
    assert seconds < PLACEMENT_BOUND
