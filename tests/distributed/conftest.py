"""One real local Ray cluster per test session, loopback only, in a temp dir of its own.

Everything the cluster starts is ended at teardown by pid (Ray's agents may
ignore SIGTERM), never by name; the token lives in the environment, not in
the home directory. The session exports only the cluster's token, as a user
would: what keeps the cluster private and quiet is tf_accum's doing
(tests/distributed/test_ways_in.py starts processes from an empty environment).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tf_accum.examples.processes import descendants
from tf_accum.resources import ResourceTable, set_table

OBJECT_STORE_BYTES = 256 * 2**20
PROCESS_WAIT = 60.0  # seconds; generous, reached only when something is broken
ROOT = Path(__file__).resolve().parents[2]
# The cluster's token, as its user sets it; the processes the tests start inherit it.
ENVIRONMENT = {"RAY_AUTH_MODE": "token"}
# What tf_accum sets for Ray when it attaches (restored after the session).
SET_BY_TF_ACCUM = (
    "RAY_USAGE_STATS_ENABLED",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
    "RAY_DISABLE_FAILURE_SIGNAL_HANDLER",
)


@dataclass
class Cluster:
    address: str
    table: ResourceTable
    temp_dir: str

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a process that joins the cluster through TF_ACCUM_RAY_ADDRESS."""
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        return dict(os.environ, TF_ACCUM_RAY_ADDRESS=self.address, PYTHONPATH=path, **extra)


def kill_pids(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Cluster]:
    names = [*ENVIRONMENT, "RAY_AUTH_TOKEN", *SET_BY_TF_ACCUM]
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(ENVIRONMENT, RAY_AUTH_TOKEN=secrets.token_hex(32))
    import ray  # first, as a program may: tf_accum's settings still apply

    from tf_accum.distributed import table_for_address

    # Short: Ray puts unix sockets under it (paths are limited to about 107 bytes).
    temp_dir = tempfile.mkdtemp(prefix="tfa", dir="/tmp" if os.path.isdir("/tmp") else None)
    before = descendants(os.getpid())
    try:
        table = table_for_address(
            "local",
            _temp_dir=temp_dir,
            object_store_memory=OBJECT_STORE_BYTES,
            num_cpus=1,
            log_to_driver=False,
        )
        yield Cluster(ray.get_runtime_context().gcs_address, table, temp_dir)
    finally:
        started = descendants(os.getpid()) - before
        ray.shutdown()
        kill_pids(started | (descendants(os.getpid()) - before))
        shutil.rmtree(temp_dir, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def ray_table(ray_cluster: Cluster) -> Iterator[ResourceTable]:
    """The Ray table, installed as the process's for one test; what it made is destroyed after."""
    previous = set_table(ray_cluster.table)
    try:
        yield ray_cluster.table
    finally:
        set_table(previous)  # type: ignore[arg-type]
        ray_cluster.table.close()


RAY_MISSING = importlib.util.find_spec("ray") is None


def pytest_collection_modifyitems(items: list[Any]) -> None:
    # Tests here share one cluster; run them together, after the rest.
    here = str(Path(__file__).parent)
    items.sort(key=lambda item: str(item.fspath).startswith(here))
    if RAY_MISSING:
        # Without the `ray` extra (the oldest-numpy CI run) there is no cluster to start.
        skip = pytest.mark.skip(reason="Ray is not installed (the `ray` extra)")
        for item in items:
            if str(item.fspath).startswith(here):
                item.add_marker(skip)


def run_python(code: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (with ``args`` as its ``sys.argv[1:]``) in a fresh interpreter;
    bounded, so a hang fails the test."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_WAIT,
    )


class Process:
    """A process of the cluster running one role of tests/distributed/roles.py (or ``module``)."""

    def __init__(
        self,
        cluster: Cluster,
        role: str,
        module: str = "tests.distributed.roles",
        environment: dict[str, str] | None = None,
        **arguments: Any,
    ) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by kill()
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, role, json.dumps(arguments)],
            cwd=ROOT,
            env=cluster.env(**(environment or {})),
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )

    def outcome(self, timeout: float = PROCESS_WAIT) -> dict[str, Any]:
        """The role's JSON outcome (fails the test if it crashed or did not finish)."""
        try:
            out, _ = self.popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a role process did not finish in {timeout} s")
        if self.popen.returncode != 0:
            self._stderr.seek(0)
            error = self._stderr.read().decode(errors="replace")[-3000:]
            pytest.fail(f"role process failed ({self.popen.returncode}):\n{error}")
        return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def error_output(self) -> str:
        """What the process wrote to stderr so far (read without moving the file's offset,
        which the process writes at)."""
        size = os.fstat(self._stderr.fileno()).st_size
        return os.pread(self._stderr.fileno(), size, 0).decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL, by pid: no chance to clean up, as when a machine dies."""
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(PROCESS_WAIT)
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        self._stderr.close()


@pytest.fixture
def spawn(ray_cluster: Cluster) -> Iterator[Callable[..., Process]]:
    """Start role processes on the cluster; every one is killed (by pid) after the test."""
    started: list[Process] = []

    def start(
        role: str,
        module: str = "tests.distributed.roles",
        environment: dict[str, str] | None = None,
        **arguments: Any,
    ) -> Process:
        process = Process(ray_cluster, role, module, environment, **arguments)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def serve_ps(ray_cluster: Cluster) -> Iterator[Callable[[dict[str, list[str]]], None]]:
    """``serve_ps(spec)``: this process serves the spec's ps tasks, as each ps task's
    process does with its ``tf.train.Server`` (a task's host is made by its own ps
    process); the hosts are ended after the test."""
    import ray

    import tf_accum.compat.v1 as tf

    servers: dict[tuple[str, int], Any] = {}

    def serve(spec: dict[str, list[str]]) -> None:
        for index in range(len(spec["ps"])):
            key = (json.dumps(spec, sort_keys=True), index)
            if key not in servers:
                servers[key] = tf.train.Server(spec, job_name="ps", task_index=index)

    yield serve
    for (_, index), server in servers.items():
        link = server.runtime.link("ps", index)
        if link is not None:
            ray.kill(link.actor, no_restart=True)


@pytest.fixture
def task(serve_ps: Any) -> Iterator[Callable[..., tuple[Any, Any]]]:
    """``task(spec, index, graph, ps=True)``: this process as the spec's worker task
    ``index`` (one Server per task), unless ``ps=False`` the spec's ps tasks served
    here too (see ``serve_ps``): (its Server, a new Session on its target); the
    sessions are closed after the test."""
    import tf_accum.compat.v1 as tf

    sessions: list[Any] = []
    servers: dict[tuple[str, int], Any] = {}

    def start(spec: Any, index: int = 0, graph: Any = None, ps: bool = True) -> tuple[Any, Any]:
        if ps:
            serve_ps(spec)  # the ps tasks' hosts, made as their processes make them
        key = (json.dumps(spec, sort_keys=True), index)
        if key not in servers:
            servers[key] = tf.train.Server(spec, job_name="worker", task_index=index)
        server = servers[key]
        sess = tf.Session(server.target, graph=graph)
        sessions.append(sess)
        return server, sess

    yield start
    for sess in sessions:
        sess.close()
