"""``python -m tf_accum.launch``: a TF1 program run as a job, with real processes.

Most tests launch a small program that prints what it was told and exits as
asked (it never touches Ray, so they pass a cluster address and start none);
two start a Ray head of the launcher's own and run the guide's program on it.
Every process a launch starts inherits a marker in its environment, so the
tests find (and, when something is broken, kill) each one by pid.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.test_main_job_processes import command_line, processes_marked
from tf_accum.launch.__main__ import parse
from tf_accum.launch.head import alive
from tf_accum.launch.tasks import Task, cluster_hosts, exit_status, task_flags, tf_config
from tf_accum.launch.threads import THREAD_VARIABLES, threads_per_task

ROOT = Path(__file__).resolve().parent.parent
LAUNCH_WAIT = 120.0  # seconds; generous, reached only when something is broken
GONE_WAIT = 10.0
STACKS_WAIT = 5.0  # seconds for hung tasks to print their stacks
NEEDS_RAY = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed (the `ray` extra)"
)
NO_CLUSTER = "127.0.0.1:1"  # passed along to the tasks; the test program never uses it

# Prints what it was told as one JSON line (and a line on stderr); a ps task then
# waits for ever, as server.join() does; worker i exits with the i-th of --exit
# ("wait": never, "kill": by SIGKILL), once every task has printed if --barrier
# names a directory.
ROLE_PROGRAM = """\
import argparse, json, os, signal, sys, threading, time
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
parser = argparse.ArgumentParser()
for flag in ("--job_name", "--ps_hosts", "--worker_hosts"):
    parser.add_argument(flag)
parser.add_argument("--task_index", type=int)
parser.add_argument("--exit", default="")
parser.add_argument("--barrier", default="")
args, rest = parser.parse_known_args()
config = json.loads(os.environ["TF_CONFIG"])
print(json.dumps({
    "argv": sys.argv[1:], "flags": vars(args), "tf_config": config, "rest": rest,
    "job": os.environ["TF_ACCUM_JOB"], "address": os.environ["TF_ACCUM_RAY_ADDRESS"],
    "pid": os.getpid(),
    "threads": {name: os.environ.get(name) for name in THREAD_VARIABLES},
}))
print("on stderr", file=sys.stderr)
role, index = config["task"]["type"], config["task"]["index"]
if args.barrier:  # the workers wait until every task has printed
    open(os.path.join(args.barrier, f"{role}{index}"), "w").close()
    tasks = sum(len(hosts) for hosts in config["cluster"].values())
    deadline = time.monotonic() + 60
    while len(os.listdir(args.barrier)) < tasks and time.monotonic() < deadline:
        time.sleep(0.05)
outcome = "wait" if role == "ps" else args.exit.split(",")[index]
if outcome == "wait":
    threading.Event().wait()
elif outcome == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(int(outcome))
"""


class Launch:
    """A launcher process, its output lines collected as they come."""

    def __init__(
        self,
        tmp_path: Path,
        *args: str,
        home: Path | None = None,
        extra_env: dict[str, str] | None = None,
        unset: Sequence[str] = (),
    ) -> None:
        self.marker = f"launch-{secrets.token_hex(8)}"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("RAY_", "TF_ACCUM_")) and k not in unset
        }
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env.update(PYTHONPATH=path, TF_ACCUM_TEST_MARKER=self.marker, PYTHONFAULTHANDLER="1")
        if home is not None:
            env["HOME"] = str(home)
        env.update(extra_env or {})
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tf_accum.launch", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(pipe, lines), daemon=True)
            for pipe, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, pipe: Any, lines: list[str]) -> None:
        with pipe:
            for line in pipe:
                with self._changed:
                    lines.append(line.rstrip("\n"))
                    self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float = LAUNCH_WAIT) -> None:
        """Wait until a line of either stream matches ``pattern``."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: (
                    any(re.search(pattern, line) for line in self.out + self.err)
                    or self.process.poll() is not None
                ),
                timeout,
            )
            seen = any(re.search(pattern, line) for line in self.out + self.err)
        assert found and seen, f"no line matches {pattern!r}:\n" + "\n".join(self.err[-40:])

    def finish(self, timeout: float = LAUNCH_WAIT) -> int:
        """The launcher's exit status, once it and its output have ended."""
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            # where each task waits: faulthandler prints its threads' stacks on SIGABRT
            for pid in processes_marked(self.marker):
                if b"--job_name=" in command_line(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGABRT)
            time.sleep(STACKS_WAIT)
            raise AssertionError(
                f"the launcher did not finish within {timeout:g} s; its output:\n"
                + "\n".join(self.out[-100:])
                + "\nand its errors:\n"
                + "\n".join(self.err[-400:])
            ) from None
        for reader in self._readers:
            reader.join(timeout)
        return status

    def tasks_told(self) -> dict[str, dict[str, Any]]:
        """What each task of the role program printed, by the prefix of its line."""
        told = {}
        for line in self.out:
            match = re.fullmatch(r"\[(\w+)\] (\{.*\})", line)
            if match:
                told[match.group(1)] = json.loads(match.group(2))
        return told

    def task_pids(self) -> dict[str, int]:
        """Each task's pid, as the launcher's line listing the tasks gives it."""
        (line,) = [line for line in self.err if line.startswith("[launch] job ")]
        return {name: int(pid) for name, pid in re.findall(r"(\w+) \(pid (\d+)", line)}

    def left_running(self) -> dict[int, str]:
        """Processes of this launch still running once it has ended (bounded wait),
        with their command lines."""
        deadline = time.monotonic() + GONE_WAIT
        while (left := processes_marked(self.marker)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return {
            pid: command_line(pid).replace(b"\0", b" ").decode(errors="replace") for pid in left
        }

    def kill_all(self) -> None:
        """For a failing test: leave nothing behind."""
        for pid in processes_marked(self.marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(GONE_WAIT)


@contextlib.contextmanager
def launched(
    tmp_path: Path,
    *args: str,
    home: Path | None = None,
    extra_env: dict[str, str] | None = None,
    unset: Sequence[str] = (),
) -> Iterator[Launch]:
    launch = Launch(tmp_path, *args, home=home, extra_env=extra_env, unset=unset)
    try:
        yield launch
    finally:
        launch.kill_all()


@pytest.fixture
def role_program(tmp_path: Path) -> str:
    path = tmp_path / "role.py"
    path.write_text(ROLE_PROGRAM)
    return str(path)


def test_each_task_is_told_its_role_by_flags_and_tf_config(
    tmp_path: Path, role_program: str
) -> None:
    runs = []
    for run in range(2):
        barrier = tmp_path / f"started{run}"
        barrier.mkdir()
        with launched(
            tmp_path, "--ps", "2", "--workers", "3", "--address", NO_CLUSTER,
            role_program, "--", "--exit", "0,0,0", f"--barrier={barrier}", "extra",
        ) as launch:  # fmt: skip
            assert launch.finish() == 0, "\n".join(launch.err)
            assert launch.left_running() == {}
            runs.append(launch)
    told = runs[0].tasks_told()
    names = ["ps0", "ps1", "worker0", "worker1", "worker2"]
    assert sorted(told) == names
    hosts = told["ps0"]["tf_config"]["cluster"]
    assert sorted(hosts) == ["ps", "worker"] and (len(hosts["ps"]), len(hosts["worker"])) == (2, 3)
    assert len(set(hosts["ps"] + hosts["worker"])) == 5
    assert all(re.fullmatch(r"localhost:\d+", host) for host in hosts["ps"] + hosts["worker"])
    for name, seen in told.items():
        job, index = name.rstrip("0123456789"), int(name[-1])
        assert seen["tf_config"] == {"cluster": hosts, "task": {"type": job, "index": index}}
        assert seen["argv"] == [
            f"--job_name={job}",
            f"--task_index={index}",
            f"--ps_hosts={','.join(hosts['ps'])}",
            f"--worker_hosts={','.join(hosts['worker'])}",
            "--exit",
            "0,0,0",
            f"--barrier={tmp_path / 'started0'}",
            "extra",
        ]
        assert seen["rest"] == ["extra"]
        assert seen["address"] == NO_CLUSTER
    # one job id for every task of a run, a new one for each run
    assert len({seen["job"] for seen in told.values()}) == 1
    assert told["ps0"]["job"] != runs[1].tasks_told()["ps0"]["job"]
    # every line of a task, on stdout or stderr, comes out with its name in front
    assert sorted(line for line in runs[0].err if line.endswith("on stderr")) == [
        f"[{name}] on stderr" for name in names
    ]
    assert all(line.startswith(tuple(f"[{n}] " for n in names)) for line in runs[0].out)
    # the ps tasks never exit on their own: the launcher ended them after the workers
    assert any("the workers are done: ending ps0, ps1" in line for line in runs[0].err)
    assert not any(alive(seen["pid"]) for seen in told.values())


def test_a_failing_worker_ends_the_job_with_its_status(tmp_path: Path, role_program: str) -> None:
    with launched(
        tmp_path, "--ps", "1", "--workers", "2", "--address", NO_CLUSTER,
        role_program, "--exit", "wait,3",
    ) as launch:  # fmt: skip
        assert launch.finish() == 3, "\n".join(launch.err)
        assert "[launch] worker1 exited with status 3: ending the other tasks" in launch.err
        pids = launch.task_pids()
        assert sorted(pids) == ["ps0", "worker0", "worker1"]
        assert launch.left_running() == {}
        assert not any(alive(pid) for pid in pids.values())


def test_a_worker_killed_by_a_signal_gives_128_plus_its_number(
    tmp_path: Path, role_program: str
) -> None:
    with launched(
        tmp_path, "--ps", "0", "--workers", "2", "--address", NO_CLUSTER,
        role_program, "--exit", "wait,kill",
    ) as launch:  # fmt: skip
        assert launch.finish() == 128 + signal.SIGKILL, "\n".join(launch.err)
        assert launch.left_running() == {}
    assert exit_status(-signal.SIGTERM) == 143 and exit_status(3) == 3


def test_no_flags_leaves_tf_config_alone_to_say_the_role(tmp_path: Path, role_program: str) -> None:
    barrier = tmp_path / "started"  # the worker exits once the ps task has printed too
    barrier.mkdir()
    with launched(
        tmp_path, "--no-flags", "--ps", "1", "--workers", "1", "--address", NO_CLUSTER,
        role_program, "--", "--exit", "0", f"--barrier={barrier}",
    ) as launch:  # fmt: skip
        assert launch.finish() == 0, "\n".join(launch.err)
        told = launch.tasks_told()
        assert told["worker0"]["argv"] == ["--exit", "0", f"--barrier={barrier}"]
        assert told["worker0"]["tf_config"]["task"] == {"type": "worker", "index": 0}
        assert told["ps0"]["tf_config"]["task"] == {"type": "ps", "index": 0}


def job_line(launch: Launch) -> str:
    (line,) = [line for line in launch.err if line.startswith("[launch] job ")]
    return line


def test_each_task_gets_an_equal_share_of_the_cores_for_blas_threads(
    tmp_path: Path, role_program: str
) -> None:
    barrier = tmp_path / "started"  # the workers exit once the ps task has printed too
    barrier.mkdir()
    with launched(
        tmp_path, "--ps", "1", "--workers", "2", "--address", NO_CLUSTER,
        role_program, "--", "--exit", "0,0", f"--barrier={barrier}", unset=THREAD_VARIABLES,
    ) as launch:  # fmt: skip
        assert launch.finish() == 0, "\n".join(launch.err)
        cores = len(os.sched_getaffinity(0))
        share = str(max(1, cores // 3))
        told = launch.tasks_told()
        assert sorted(told) == ["ps0", "worker0", "worker1"]
        for seen in told.values():
            assert seen["threads"] == dict.fromkeys(THREAD_VARIABLES, share)
        assert job_line(launch).endswith(
            f"; BLAS/OpenMP threads per task: {share} ({cores} core{'s' * (cores != 1)} / 3 tasks)"
        )


@pytest.mark.parametrize("options", [[], ["--no-thread-limit"]])
def test_a_thread_variable_the_user_set_leaves_them_all_alone(
    tmp_path: Path, role_program: str, options: list[str]
) -> None:
    with launched(
        tmp_path, *options, "--ps", "0", "--workers", "2", "--address", NO_CLUSTER,
        role_program, "--exit", "0,0",
        unset=THREAD_VARIABLES, extra_env={"MKL_NUM_THREADS": "5"},
    ) as launch:  # fmt: skip
        assert launch.finish() == 0, "\n".join(launch.err)
        told = launch.tasks_told()
        assert sorted(told) == ["worker0", "worker1"]
        for seen in told.values():
            assert seen["threads"] == {
                "OPENBLAS_NUM_THREADS": None,
                "OMP_NUM_THREADS": None,
                "MKL_NUM_THREADS": "5",
            }
        assert job_line(launch).endswith("; BLAS/OpenMP threads as set: MKL_NUM_THREADS=5")


def test_no_thread_limit_leaves_the_thread_variables_unset(
    tmp_path: Path, role_program: str
) -> None:
    with launched(
        tmp_path, "--no-thread-limit", "--ps", "0", "--workers", "1", "--address", NO_CLUSTER,
        role_program, "--exit", "0", unset=THREAD_VARIABLES,
    ) as launch:  # fmt: skip
        assert launch.finish() == 0, "\n".join(launch.err)
        assert launch.tasks_told()["worker0"]["threads"] == dict.fromkeys(THREAD_VARIABLES)
        assert job_line(launch).endswith("; BLAS/OpenMP threads not limited (--no-thread-limit)")


def test_the_thread_share_is_the_cores_divided_by_the_tasks_at_least_one() -> None:
    shares = {(c, t): threads_per_task(c, t) for c in (1, 2, 8) for t in (1, 3, 4)}
    assert shares == {
        (1, 1): 1, (1, 3): 1, (1, 4): 1,
        (2, 1): 2, (2, 3): 1, (2, 4): 1,
        (8, 1): 8, (8, 3): 2, (8, 4): 2,
    }  # fmt: skip
    assert parse(["--no-thread-limit", __file__]).thread_limit is False
    assert parse([__file__]).thread_limit is True


def test_sigint_before_the_tasks_end_ends_every_one(tmp_path: Path, role_program: str) -> None:
    with launched(
        tmp_path, "--ps", "1", "--workers", "2", "--address", NO_CLUSTER,
        role_program, "--exit", "wait,wait",
    ) as launch:  # fmt: skip
        launch.wait_for(r"^\[launch\] job ")
        for name in ("ps0", "worker0", "worker1"):
            launch.wait_for(rf"^\[{name}\] on stderr")
        started = processes_marked(launch.marker) - {launch.process.pid}
        assert len(started) == 3
        launch.process.send_signal(signal.SIGINT)
        assert launch.finish() == 128 + signal.SIGINT
        assert "[launch] stopped: every task was ended" in launch.err
        assert launch.left_running() == {}
        assert not any(alive(pid) for pid in started)


def test_a_killed_launchers_tasks_end_within_the_bound(tmp_path: Path, role_program: str) -> None:
    """SIGKILL leaves the launcher no time to end its tasks: Linux sends each the
    SIGTERM it would have sent (the parent-death signal), and they end."""
    with launched(
        tmp_path, "--address", NO_CLUSTER, "--workers", "2", role_program, "--exit", "wait,wait"
    ) as launch:
        launch.wait_for(r"^\[launch\] job ")
        for name in ("ps0", "worker0", "worker1"):
            # its two lines come through two pipes: either may be read first
            launch.wait_for(rf"^\[{name}\] on stderr")
            launch.wait_for(rf"^\[{name}\] \{{")
        tasks = launch.task_pids()
        assert sorted(tasks) == ["ps0", "worker0", "worker1"]
        # the same processes as the programs' own (no process in between), with no
        # signal handler of the launcher's: SIGTERM is at its default
        told = launch.tasks_told()
        assert {name: told[name]["pid"] for name in tasks} == tasks
        for pid in tasks.values():
            assert signal_disposition(pid, signal.SIGTERM) == "default"
        launch.process.kill()
        launch.process.wait(GONE_WAIT)
        assert launch.left_running() == {}, "tasks outlived their launcher"


def signal_disposition(pid: int, signum: int) -> str:
    """What process ``pid`` does on ``signum``: "caught", "ignored" or "default"."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    bit = 1 << (signum - 1)
    if int(fields["SigCgt"], 16) & bit:
        return "caught"
    return "ignored" if int(fields["SigIgn"], 16) & bit else "default"


@NEEDS_RAY
def test_a_killed_launchers_tasks_and_ray_head_end(tmp_path: Path) -> None:
    program = tmp_path / "train.py"
    program.write_text(guide_program())
    with launched(tmp_path, str(program), "--", "--steps", "1000000") as launch:
        launch.wait_for(r"^\[worker0\] step 3: loss")
        started = processes_marked(launch.marker) - {launch.process.pid}
        assert len(started) > 3  # the tasks, and Ray's processes
        # the head's directory: a killed launcher cannot remove it (this test does)
        found = {
            m.group(1)
            for pid in started
            if (m := re.search(rb"--temp-dir=([^\0]+)", command_line(pid)))
        }
        try:
            launch.process.kill()
            launch.process.wait(GONE_WAIT)
            assert launch.left_running() == {}, "processes outlived their launcher"
        finally:
            for directory in found:
                shutil.rmtree(directory.decode(), ignore_errors=True)


def test_the_arguments_are_checked(tmp_path: Path, role_program: str) -> None:
    spec = parse(["--ps", "2", "--workers", "3", role_program, "--", "--steps", "5"])
    assert (spec.ps, spec.workers, spec.arguments, spec.flags) == (2, 3, ["--steps", "5"], True)
    assert parse([role_program, "--steps", "5"]).arguments == ["--steps", "5"]
    # "local" would start a cluster in each task: the job gets a head of its own instead
    assert parse(["--address", "local", role_program]).address is None
    assert parse(["--address", "127.0.0.1:6379", role_program]).address == "127.0.0.1:6379"
    for wrong, message in (
        (["--workers", "0", role_program], "--workers must be 1 or more"),
        (["--ps", "-1", role_program], "--ps must be 0 or more"),
        ([str(tmp_path / "missing.py")], "no program file"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "tf_accum.launch", *wrong],
            capture_output=True, text=True, timeout=LAUNCH_WAIT,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip
        assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_flags_and_tf_config_match_tensorflows_layout() -> None:
    hosts = cluster_hosts(1, 2)
    assert task_flags(Task("worker", 1), hosts) == [
        "--job_name=worker",
        "--task_index=1",
        f"--ps_hosts={hosts['ps'][0]}",
        f"--worker_hosts={','.join(hosts['worker'])}",
    ]
    config = json.loads(tf_config(Task("ps", 0), hosts))
    assert config == {"cluster": hosts, "task": {"type": "ps", "index": 0}}
    assert "ps" not in cluster_hosts(0, 1)  # no empty job in a ClusterSpec


def guide_program() -> str:
    """The complete program docs/tf1-cluster.md starts with (its first ``py`` block)."""
    text = (ROOT / "docs" / "tf1-cluster.md").read_text()
    match = re.search(r"```py\n(.*?)```", text, re.S)
    assert match is not None, "the guide has no complete program"
    return match.group(1)


# The lines of a normal run of the guide's program through the launcher: its own,
# and the launcher's.
PROGRAM_LINE = r"\[worker0\] (step \d+: loss \d+\.\d{4}|weights \[.*\])"
LAUNCHER_LINE = "|".join(
    [
        r"\[launch\] starting a Ray head for the job \(this machine, loopback only; it stops "
        r"when the job ends\)",
        r"\[launch\] job \w+ on Ray at \S+: ps0 \(pid \d+\), worker0 \(pid \d+\), "
        r"worker1 \(pid \d+\); BLAS/OpenMP threads .+",
        r"\[launch\] worker\d exited \(status 0\); still running: worker\d",
        r"\[launch\] the workers are done(: ending ps0)?",
        # the ps task's join() returns once the workers are gone: it may exit on its
        # own before the launcher has seen the last worker's end
        r"\[launch\] ps0 exited \(status 0\) while the workers ran",
    ]
)

# What the guide's program printed on TensorFlow 2.21 (the test below): the first
# loss and the final weights, which tf_accum's run must print too.
GUIDE_LINES_ON_TENSORFLOW = ["[worker0] step 1: loss 4.6449", "[worker0] weights [ 1.5 -2.   0.5]"]


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed (`oracle`)"
)
def test_the_guides_program_runs_on_tensorflow_through_the_launcher(tmp_path: Path) -> None:
    """The flags name real ports: TensorFlow's own servers listen on them."""
    program = tmp_path / "train_tf.py"
    source = guide_program()
    assert "import tf_accum.compat.v1 as tf" in source
    program.write_text(
        source.replace("import tf_accum.compat.v1 as tf", "import tensorflow.compat.v1 as tf")
    )
    with launched(tmp_path, "--address", NO_CLUSTER, str(program)) as launch:
        assert launch.finish() == 0, "\n".join(launch.err[-60:])
        assert set(GUIDE_LINES_ON_TENSORFLOW) <= set(launch.out)
        assert launch.left_running() == {}


@NEEDS_RAY
@pytest.mark.parametrize("home_token", [False, True], ids=["empty home", "token in home"])
def test_the_guides_program_trains_on_a_head_of_its_own(tmp_path: Path, home_token: bool) -> None:
    """With a token in ``~/.ray/auth_token`` (which a bare ``ray.init()`` writes), the
    head (``ray start`` turns token mode on for it) and the tasks (Ray does not, for
    an address it is given) use it alike."""
    program = tmp_path / "train.py"
    program.write_text(guide_program())
    home = tmp_path / "home"
    home.mkdir()
    token = secrets.token_hex(32)
    if home_token:
        (home / ".ray").mkdir()
        (home / ".ray" / "auth_token").write_text(token)
    with launched(tmp_path, "--ps", "1", "--workers", "2", str(program), home=home) as launch:
        assert launch.finish() == 0, "\n".join(launch.err[-60:])
        losses = [
            float(m.group(1))
            for line in launch.out
            if (m := re.fullmatch(r"\[worker0\] step \d+: loss (\S+)", line))
        ]
        assert len(losses) == 40 and losses[-1] < 1e-3 * losses[0]
        assert set(GUIDE_LINES_ON_TENSORFLOW) <= set(launch.out)
        assert launch.left_running() == {}
        # nothing but the program's lines and the launcher's own: no Ray log line
        assert [line for line in launch.out if not re.fullmatch(PROGRAM_LINE, line)] == []
        assert [line for line in launch.err if not re.fullmatch(LAUNCHER_LINE, line)] == []
        assert any(
            re.match(r"\[launch\] job \w+ on Ray at 127\.0\.0\.1:\d+: ", x) for x in launch.err
        )
    # the head's token stayed in the environment: nothing was written to the home directory
    written = sorted(str(path.relative_to(home)) for path in home.rglob("*") if path.is_file())
    assert written == ([".ray/auth_token"] if home_token else [])
    if home_token:
        assert (home / ".ray" / "auth_token").read_text() == token


@NEEDS_RAY
def test_sigint_ends_the_tasks_and_the_ray_head(tmp_path: Path) -> None:
    program = tmp_path / "train.py"
    program.write_text(guide_program())
    with launched(tmp_path, str(program), "--", "--steps", "1000000") as launch:
        launch.wait_for(r"^\[worker0\] step 3: loss")
        started = processes_marked(launch.marker) - {launch.process.pid}
        head = re.search(r"on Ray at (127\.0\.0\.1:\d+): ", "\n".join(launch.err))
        assert head is not None
        assert len(started) > 3  # the tasks, and Ray's processes
        launch.process.send_signal(signal.SIGINT)
        assert launch.finish() == 128 + signal.SIGINT
        assert launch.left_running() == {}
        assert not any(alive(pid) for pid in started)


@NEEDS_RAY
def test_a_lost_ray_head_ends_the_job(tmp_path: Path, role_program: str) -> None:
    with launched(tmp_path, "--workers", "1", role_program, "--exit", "wait") as launch:
        launch.wait_for(r"^\[worker0\] on stderr")
        (head,) = [
            pid
            for pid in processes_marked(launch.marker)
            if b"ray.scripts.scripts\0start" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        os.kill(head, signal.SIGKILL)
        assert launch.finish() == 1
        assert "[launch] the job's Ray head exited: ending the tasks" in launch.err
        assert any("Ray head had exited with status -9" in line for line in launch.err)
        assert launch.left_running() == {}
