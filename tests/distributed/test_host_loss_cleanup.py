"""Orphaned hosts: ``python -m tf_accum.distributed.cleanup`` lists host processes
whose raylet is gone, ends the ones named with ``--kill``, and leaves live hosts alone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.conftest import PROCESS_WAIT, ROOT
from tests.distributed.test_cross_process import unique
from tests.distributed.test_errors import _host
from tests.helpers import wait_until
from tf_accum.distributed import cleanup

SLEEP = f"300.{os.getpid()}"  # tells this test's stand-in apart
TITLE = f"ray::ResourceHost {SLEEP}"


def _cleanup(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tf_accum.distributed.cleanup", *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=PROCESS_WAIT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture
def orphan() -> Iterator[int]:
    """A process titled as a host whose parent is not a raylet (reparented, as an
    orphan is); ended by pid. (A host whose raylet is SIGKILLed here exits on its
    own within seconds, so the stand-in keeps the test deterministic.)"""
    launcher = subprocess.run(
        ["bash", "-c", f"(exec -a ray::ResourceHost sleep {SLEEP} >/dev/null 2>&1 &); true"],
        timeout=PROCESS_WAIT,
        check=True,
    )
    assert launcher.returncode == 0
    found: list[int] = []

    def started() -> bool:
        found[:] = [h.pid for h in cleanup.orphaned_hosts() if h.title == TITLE]
        return bool(found)

    wait_until(started)
    try:
        yield found[0]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(found[0], signal.SIGKILL)


def test_an_orphaned_host_is_listed_and_ended_and_a_live_one_left_alone(
    ray_cluster, ray_table, orphan
):
    import ray

    live, _ = _host({}, unique("live"))  # on the session's own node, whose raylet runs
    _, live_pid, _ = ray.get(live.ping.remote(), timeout=PROCESS_WAIT)
    try:
        listed = _cleanup()
        assert f"{orphan}\tparent " in listed and "ray::ResourceHost" in listed
        assert f"{live_pid}\t" not in listed
        assert "run again with --kill" in listed
        ended = _cleanup("--kill", str(orphan))  # only ours: other users' hosts are theirs
        assert "ended 1 process(es)" in ended
        wait_until(lambda: orphan not in {h.pid for h in cleanup.orphaned_hosts()})
        assert not _is_alive(orphan) or _is_zombie(orphan)
        assert _is_alive(live_pid)
    finally:
        ray.kill(live, no_restart=True)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_listing_skips_other_processes_and_says_when_there_is_none(tmp_path) -> None:
    fake = tmp_path / "proc"
    processes = [
        (10, 1, b"python\0train.py"),
        (11, 1, b"ray::ResourceHost"),
        (14, 1, b"ray::ResourceHost.run"),  # a host that is running a call
    ]
    for pid, parent, title in processes:
        (fake / str(pid)).mkdir(parents=True)
        (fake / str(pid) / "cmdline").write_bytes(title)
        rest = " ".join(["S", str(parent)] + ["0"] * 19 + ["25"])
        (fake / str(pid) / "stat").write_text(f"{pid} (x) {rest}")
    (fake / "12").mkdir()
    (fake / "12" / "cmdline").write_bytes(b"ray::ResourceHost")
    (fake / "12" / "stat").write_text("12 (x) " + " ".join(["S", "13"] + ["0"] * 19 + ["25"]))
    (fake / "13").mkdir()
    (fake / "13" / "cmdline").write_bytes(b"/opt/ray/core/src/ray/raylet/raylet\0--flag")
    hosts = cleanup.orphaned_hosts(fake)
    # 12's raylet still runs
    assert sorted((h.pid, h.parent) for h in hosts) == [(11, 1), (14, 1)]
    assert hosts[0].rss_bytes == 25 * os.sysconf("SC_PAGE_SIZE")
    assert cleanup.orphaned_hosts(tmp_path / "nowhere") == []
