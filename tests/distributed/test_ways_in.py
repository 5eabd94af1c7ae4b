"""Every way into Ray gives the same result, from an empty environment: loopback only,
the token kept out of the home directory, no Ray warnings, one ``ray.init`` however
many threads race to it, and a join of a running loopback cluster within seconds.

The ways in: ``tfa.distributed.connect``, a ``tf.train.Server`` (and its sessions),
``TF_ACCUM_RAY_ADDRESS``, each also in a program that imported ``ray`` first. Each
case runs in a fresh interpreter whose environment has only PATH, PYTHONPATH, an
empty HOME and what the case names (the cluster's token, to join it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.conftest import PROCESS_WAIT, ROOT, Cluster, run_python

JOIN_BOUND = 20.0  # seconds to attach to a running loopback cluster
STOP_BOUND = 10.0  # seconds for a ps process to end after SIGTERM, or join() to return

LOOPBACK = {
    "0100007F",  # 127.0.0.1
    "0000000000000000FFFF00000100007F",  # ::ffff:127.0.0.1
    "00000000000000000000000001000000",  # ::1
}
# A Ray log line of level WARNING or above ("... WARNING worker.py:1681 -- ..."), and
# the dump Ray's native signal handler prints ("*** SIGTERM received at time=...").
RAY_WARNING = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b [\w.]+\.py:\d+ --|\*\*\* SIG")

# Prints, after the case's code: the listening TCP addresses of this process and
# the processes it started, whether the token is in the environment, the seconds
# the case's attach took, and what the home directory holds.
REPORT = """
import json, os, time
from tf_accum.examples.processes import descendants

def listening():
    inodes = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == "0A":
                    inodes[int(fields[9])] = fields[1].split(":")[0]
    seen = []
    for pid in descendants(os.getpid()) | {os.getpid()}:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        seen += [inodes[int(l[8:-1])] for l in links if l.startswith("socket:[")
                 and int(l[8:-1]) in inodes]
    return seen

home = os.environ["HOME"]
print(json.dumps({
    "listening": listening(),
    "token_in_environment": bool(os.environ.get("RAY_AUTH_TOKEN")),
    "seconds": seconds,
    "home": sorted(os.path.join(d, f) for d, _, fs in os.walk(home) for f in fs),
}), flush=True)
"""


def _spec() -> dict[str, list[str]]:
    """A ClusterSpec of one ps task and one worker no other test uses."""
    name = uuid.uuid4().hex[:8]
    return {"ps": [f"ps-{name}:2222"], "worker": [f"worker-{name}:2222"]}


def clean_env(home: Path, **settings: str) -> dict[str, str]:
    """An environment with nothing Ray or tf_accum reads but ``settings``."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "HOME": str(home),
        **settings,
    }


def _run(code: str, env: dict[str, str]) -> tuple[dict[str, Any], str]:
    done = run_python(code + REPORT, env)
    assert done.returncode == 0, done.stderr[-3000:]
    return _last_json(done.stdout), done.stderr


def _last_json(out: str) -> Any:
    # Ray may forward its nodes' log lines to the stdout of a process that joined
    # the session cluster, the busy one of the whole test session (not this case's)
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def _timed(attach: str, first: str = "") -> str:
    return f"{first}import time\nstart = time.monotonic()\n{attach}\nseconds = time.monotonic() - start\n"


STARTS = {
    "connect": _timed("import tf_accum as tfa\ntfa.distributed.connect('local')"),
    "connect, ray imported first": _timed(
        "import tf_accum as tfa\ntfa.distributed.connect('local')", first="import ray\n"
    ),
    "Server": _timed(
        "import tf_accum.compat.v1 as tf\n"
        f"server = tf.train.Server({_spec()!r}, job_name='ps', task_index=0)"
    ),
    "Server, ray imported first": _timed(
        "import tf_accum.compat.v1 as tf\n"
        f"server = tf.train.Server({_spec()!r}, job_name='ps', task_index=0)",
        first="import ray\n",
    ),
    "connect, RAY_AUTH_MODE=token and no token": _timed(
        "import tf_accum as tfa\ntfa.distributed.connect('local')"
    ),
    "TF_ACCUM_RAY_ADDRESS=local": _timed(
        "import tf_accum as tfa\n"
        "tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])"
    ),
}


@pytest.mark.parametrize("way", list(STARTS))
def test_a_cluster_started_in_the_process_is_private_and_quiet(way: str, tmp_path: Path) -> None:
    settings = {"TF_ACCUM_RAY_ADDRESS": "local"} if "TF_ACCUM" in way else {}
    if "RAY_AUTH_MODE" in way:
        settings["RAY_AUTH_MODE"] = "token"
    report, stderr = _run(STARTS[way], clean_env(tmp_path, **settings))
    assert len(report["listening"]) >= 2, report  # at least the GCS and the raylet
    assert set(report["listening"]) <= LOOPBACK, report
    assert report["home"] == [], report  # no ~/.ray/auth_token
    assert report["token_in_environment"], report
    assert not RAY_WARNING.search(stderr), stderr[-3000:]
    assert "SIGTERM" not in stderr, stderr[-3000:]


HOME_TOKEN = """
import json, os
import tf_accum as tfa
tfa.distributed.connect("local")
from ray._raylet import AuthenticationTokenLoader
print(json.dumps({
    "mode": os.environ.get("RAY_AUTH_MODE"),
    "token_in_environment": "RAY_AUTH_TOKEN" in os.environ,
    "presented": AuthenticationTokenLoader.instance().get_raw_token(),
}), flush=True)
"""


@pytest.mark.parametrize("first", ["", "import ray\n"], ids=["tf_accum", "ray imported first"])
def test_a_cluster_started_in_the_process_uses_the_token_in_the_home_directory_quietly(
    first: str, tmp_path: Path
) -> None:
    """A token in ``~/.ray/auth_token`` (a bare ``ray.init()`` writes one) is the
    cluster's: set in token mode by tf_accum, so Ray does not warn that it turned
    token mode on, and processes started from here present it too."""
    token = uuid.uuid4().hex
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(token)
    done = subprocess.run(
        [sys.executable, "-c", first + HOME_TOKEN],
        cwd=ROOT,
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=PROCESS_WAIT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = _last_json(done.stdout)
    assert report == {"mode": "token", "token_in_environment": False, "presented": token}
    assert not RAY_WARNING.search(done.stderr), done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".ray", "auth_token"]
    assert (tmp_path / ".ray" / "auth_token").read_text() == token


JOINS = {
    "connect": _timed("import tf_accum as tfa\ntfa.distributed.connect(ADDRESS)"),
    "connect, ray imported first": _timed(
        "import tf_accum as tfa\ntfa.distributed.connect(ADDRESS)", first="import ray\n"
    ),
    "TF_ACCUM_RAY_ADDRESS": _timed(
        "import tf_accum as tfa\n"
        "tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])"
    ),
    "Server": _timed(
        "import tf_accum.compat.v1 as tf\n"
        f"server = tf.train.Server({_spec()!r}, job_name='ps', task_index=0)"
    ),
    "Server, ray imported first": _timed(
        "import tf_accum.compat.v1 as tf\n"
        f"server = tf.train.Server({_spec()!r}, job_name='ps', task_index=0)",
        first="import ray\n",
    ),
}


@pytest.mark.parametrize("way", list(JOINS))
def test_a_running_loopback_cluster_is_joined_within_seconds(
    way: str, ray_cluster: Cluster, tmp_path: Path
) -> None:
    assert ray_cluster.address.startswith("127.0.0.1:"), ray_cluster.address
    code = JOINS[way].replace("ADDRESS", repr(ray_cluster.address))
    env = clean_env(
        tmp_path,
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=os.environ["RAY_AUTH_TOKEN"],
        TF_ACCUM_RAY_ADDRESS=ray_cluster.address,
    )
    report, stderr = _run(code, env)
    assert report["seconds"] < JOIN_BOUND, report
    assert report["home"] == [], report
    assert not RAY_WARNING.search(stderr), stderr[-3000:]
    assert "SIGTERM" not in stderr, stderr[-3000:]


RACE = """
import json, threading
import numpy as np
import ray
import tf_accum.compat.v1 as tf

calls = []
init = ray.init

def counted(*args, **kwargs):
    calls.append(threading.current_thread().name)
    return init(*args, **kwargs)

ray.init = counted
spec = SPEC
server = tf.train.Server(spec, job_name="worker", task_index=0)
graph = tf.Graph()
with graph.as_default():
    with tf.device("/job:ps/task:0"):
        total = tf.Variable(np.zeros(2, np.float32), name="total")
sessions = [tf.Session(server.target, graph=graph) for _ in range(THREADS)]
start = threading.Barrier(THREADS + 1)
failures = []
ps = []

def first_run(session):
    start.wait()
    try:
        session.run(total.initializer)
    except BaseException as exc:
        failures.append(repr(exc))

def serve_ps():
    # the ps task's Server makes its host (the runs wait for it), racing the runs
    start.wait()
    ps.append(tf.train.Server(spec, job_name="ps", task_index=0))

threads = [threading.Thread(target=first_run, args=(s,)) for s in sessions]
threads.append(threading.Thread(target=serve_ps))
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"inits": len(calls), "failures": failures}), flush=True)
"""


@pytest.mark.parametrize("address", ["the cluster's", "none (local)"])
def test_threads_racing_to_the_first_run_make_one_ray_init(
    address: str, ray_cluster: Cluster, tmp_path: Path
) -> None:
    settings = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.environ["RAY_AUTH_TOKEN"]}
    if address == "the cluster's":
        settings["TF_ACCUM_RAY_ADDRESS"] = ray_cluster.address
    else:
        settings = {}
    code = RACE.replace("SPEC", repr(_spec())).replace("THREADS", "4")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean_env(tmp_path, **settings),
        capture_output=True,
        text=True,
        timeout=PROCESS_WAIT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = _last_json(done.stdout)
    assert outcome == {"inits": 1, "failures": []}, done.stderr[-3000:]


PS = """
FIRST
import tf_accum.compat.v1 as tf
server = tf.train.Server(SPEC, job_name="ps", task_index=0)
print("serving", flush=True)
server.join()
print("joined", flush=True)
"""


@pytest.mark.parametrize("first", ["", "import ray"], ids=["tf_accum", "ray imported first"])
def test_sigterm_ends_a_ps_process_quietly(
    first: str, ray_cluster: Cluster, tmp_path: Path
) -> None:
    env = clean_env(
        tmp_path,
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=os.environ["RAY_AUTH_TOKEN"],
        TF_ACCUM_RAY_ADDRESS=ray_cluster.address,
    )
    process = subprocess.Popen(
        [sys.executable, "-c", PS.replace("SPEC", repr(_spec())).replace("FIRST", first)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        while (line := process.stdout.readline()) and line.strip() != "serving":
            pass  # a node's log line Ray forwarded (see _last_json)
        assert line.strip() == "serving", process.stderr.read() if process.stderr else ""
        time.sleep(0.5)  # in join()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=STOP_BOUND)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=PROCESS_WAIT)
    # ended by the signal, as a Python program without a handler is; nothing printed
    assert process.returncode == -signal.SIGTERM, err[-3000:]
    assert "SIGTERM" not in err and "Traceback" not in err, err[-3000:]
    assert not RAY_WARNING.search(err), err[-3000:]


def test_join_returns_when_the_ps_tasks_host_ends(ray_table: Any) -> None:
    import threading

    import ray

    import tf_accum.compat.v1 as tf

    server = tf.train.Server(_spec(), job_name="ps", task_index=0)
    actor = server.runtime.host("ps", 0).actor
    threading.Timer(0.5, lambda: ray.kill(actor, no_restart=True)).start()
    start = time.monotonic()
    server.join()
    assert time.monotonic() - start < STOP_BOUND


def test_join_returns_when_stop_is_called(ray_table: Any) -> None:
    import threading

    import tf_accum.compat.v1 as tf

    server = tf.train.Server(_spec(), job_name="worker", task_index=0)
    threading.Timer(0.5, server.stop).start()
    start = time.monotonic()
    server.join()
    assert time.monotonic() - start < STOP_BOUND
