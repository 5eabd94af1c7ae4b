"""tests/background.py: the child processes tests check, run beside the other tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.background import Jobs

WAIT = 60.0  # seconds; reached only when something is broken


def _item(*keys: str) -> Any:
    marks = [pytest.mark.background(key).mark for key in keys]
    return SimpleNamespace(iter_markers=lambda name: [m for m in marks if m.name == name])


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.fixture
def jobs() -> Iterator[Jobs]:
    own = Jobs()
    yield own
    own.stop()


def test_a_started_job_runs_before_its_test_asks_and_gives_its_output(jobs) -> None:
    jobs.define("echo", _python("import sys; print('out'); print('err', file=sys.stderr)"))
    jobs.start_for([_item("echo"), _item("not defined")])  # an undefined key is ignored
    job = jobs._jobs["echo"]
    assert job.done.wait(WAIT)  # finished in the runner, nobody asked for it
    done = jobs.result("echo")
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")
    assert jobs.result("echo") is done  # run once


def test_a_job_not_started_runs_in_the_test_that_asks(jobs) -> None:
    jobs.define("exit", _python("raise SystemExit(3)"))
    assert jobs.result("exit").returncode == 3
    assert jobs._runner is None


def test_a_second_definition_of_a_key_is_ignored(jobs) -> None:
    assert jobs.define("k", _python("print(1)")) == "k"
    jobs.define("k", _python("print(2)"))
    assert jobs.result("k").stdout == "1\n"


def test_a_job_past_its_timeout_is_killed_and_its_test_gets_the_timeout(jobs) -> None:
    jobs.define("slow", _python("import time; time.sleep(60)"), timeout=0.5)
    with pytest.raises(subprocess.TimeoutExpired):
        jobs.result("slow")
    popen = jobs._jobs["slow"].popen
    assert popen is not None and popen.returncode is not None


def test_stop_kills_a_running_child_by_pid_and_drops_the_queue(jobs, tmp_path: Path) -> None:
    started = tmp_path / "started"
    code = f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(60)"
    jobs.define("sleeper", _python(code))
    jobs.define("queued", _python("print('ran')"))
    jobs.start_for([_item("sleeper"), _item("queued")])
    job = jobs._jobs["sleeper"]
    for _ in range(int(WAIT / 0.01)):  # until the child runs
        if started.exists():
            break
        job.done.wait(0.01)
    assert started.exists()
    jobs.stop()
    assert job.done.is_set() and jobs.result("sleeper").returncode == -9
    with pytest.raises(RuntimeError, match="the session has ended"):
        jobs.result("queued")


def test_scratch_is_removed_by_stop(jobs) -> None:
    path = jobs.scratch()
    assert path.is_dir() and jobs.scratch() == path
    jobs.stop()
    assert not path.exists()
