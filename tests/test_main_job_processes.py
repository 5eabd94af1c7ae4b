"""``python -m tf_accum --processes N``: worker processes on a local Ray cluster."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tf_accum.examples.sync_replicas import build_parser, config_from_args

ROOT = Path(__file__).resolve().parent.parent
JOB_WAIT = 120.0  # seconds; generous, reached only when something is broken


def processes_marked(marker: str) -> set[int]:
    """Living processes whose environment holds ``marker`` (every process the job started)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""  # it ended


def test_processes_sets_the_workers_and_a_default_replicas_to_aggregate() -> None:
    config = config_from_args(build_parser().parse_args(["--processes", "3"]))
    assert (config.processes, config.workers, config.replicas_to_aggregate) == (3, 3, 2)
    assert config.address == "local" and config.worker_kind == "processes (Ray)"
    with pytest.raises(ValueError, match="leave --workers out"):
        config_from_args(build_parser().parse_args(["--processes", "2", "--workers", "3"])).check()
    with pytest.raises(ValueError, match="cannot be combined"):
        config_from_args(build_parser().parse_args(["--processes", "2", "--graph"])).check()


NEEDS_RAY = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="Ray is not installed (the `ray` extra)"
)


def start_job(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``python -m tf_accum ARGS`` in a subprocess; the marker its processes inherit."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TF_ACCUM_RAY"))}
    marker = f"TF_ACCUM_TEST_MARKER=job-{secrets.token_hex(8)}"
    # no Ray setting: what keeps the job's cluster private and quiet is tf_accum's doing
    env.update(
        PYTHONPATH=path,
        TF_ACCUM_TEST_MARKER=marker.partition("=")[2],  # inherited by all the job starts
    )
    job = subprocess.Popen(
        [sys.executable, "-m", "tf_accum", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return job, marker


def finish(
    job: subprocess.Popen[str], marker: str, wait: float = JOB_WAIT
) -> tuple[str, str, set[int]]:
    """The job's output, once it ended (within ``wait`` seconds), and the
    processes it left (killed here, by pid)."""
    try:
        out, err = job.communicate(timeout=wait)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        left = processes_marked(marker)
        for pid in left:  # so that a failure here leaves nothing behind either
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return out, err, left


@NEEDS_RAY
def test_job_with_worker_processes_prints_its_summary_and_leaves_no_process(tmp_path) -> None:
    job, marker = start_job(tmp_path, "--processes", "2", "--steps", "3", "--no-plot", "--quiet")
    out, err, left = finish(job, marker)
    assert job.returncode == 0, err[-3000:]
    fields = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.splitlines())
    assert fields["workers"] == "2 processes (Ray)"
    assert fields["replicas to aggregate"] == "1"
    assert fields["steps"] == "3"
    applied = int(fields["gradients applied"])
    accepted = int(fields["taken by the chief"].split()[0])
    stale = int(fields["dropped as stale"].split()[0])
    unsettled = int(fields["after the last take"])
    # each take consumes at least one gradient, and no gradient is counted twice
    assert accepted >= 3
    assert applied == accepted + stale + unsettled
    assert not left, f"processes the job started are still running: {left}"
    # --quiet: nothing on stderr, Ray's own lines included (the chief's "Started a
    # local Ray instance", the workers' "Connecting to existing Ray cluster")
    assert err == "", err


@NEEDS_RAY
def test_without_quiet_ray_s_info_lines_stay_out_and_progress_shows(tmp_path) -> None:
    # without --quiet the progress lines show; Ray's own INFO lines ("Started a local
    # Ray instance", "Connecting to existing Ray cluster") stay out whatever the flag
    job, marker = start_job(tmp_path, "--processes", "2", "--steps", "2", "--no-plot")
    out, err, left = finish(job, marker)
    assert job.returncode == 0, err[-3000:]
    assert "step 2/2" in err, err
    assert "Started a local Ray instance" not in err, err
    assert "Connecting to existing Ray cluster" not in err, err
    # and no warning: Ray's own, when it attaches from a thread other than the main
    # one ("SIGTERM handler is not set"), or any other
    assert "SIGTERM" not in err and not re.search(r"\bWARNING\b [\w.]+\.py:\d+ --", err), err
    assert not left, f"processes the job started are still running: {left}"


@NEEDS_RAY
def test_a_killed_worker_process_fails_the_job_and_it_still_ends_everything(tmp_path) -> None:
    args = ["--processes", "2", "--steps", "1000000", "--compute-ms", "5", "--no-plot", "--quiet"]
    job, marker = start_job(tmp_path, *args)
    try:
        deadline = time.monotonic() + JOB_WAIT
        workers: list[int] = []
        while len(workers) < 2 and time.monotonic() < deadline and job.poll() is None:
            time.sleep(0.2)
            workers = sorted(
                pid
                for pid in processes_marked(marker)
                if b"tf_accum.examples.processes" in command_line(pid)
            )
        assert len(workers) == 2, "the worker processes did not start"
        time.sleep(2.0)  # let them join the cluster and train a while
        os.kill(workers[-1], signal.SIGKILL)
    finally:
        out, err, left = finish(job, marker)
    assert job.returncode == 1
    assert "RuntimeError: worker process 1 exited with status -9" in err
    assert not left, f"processes the job started are still running: {left}"
