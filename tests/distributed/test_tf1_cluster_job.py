"""``python -m tf_accum --tf1-cluster``: the job as a TF1 cluster, one process per task (issue 24)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.distributed.conftest import ROOT

JOB_WAIT = 300.0  # seconds; the job starts a process per task on a loaded machine


def test_the_tf1_cluster_job_trains_and_loses_no_gradient(ray_cluster) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tf_accum",
            "--tf1-cluster",
            "--address",
            ray_cluster.address,
            "--workers",
            "3",
            "--steps",
            "8",
            "--no-plot",
        ],
        cwd=ROOT,
        env=ray_cluster.env(),
        capture_output=True,
        text=True,
        timeout=JOB_WAIT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout

    def number(label: str) -> int:
        found = re.search(rf"^\s*{label}\s+(\d+)", out, re.M)
        assert found is not None, out
        return int(found.group(1))

    assert "3 processes (TF1 cluster on Ray)" in out
    # a worker applies at most one gradient per step (a slow one may miss steps);
    # each gradient is taken by the chief, dropped as stale, or sent after the last take
    applied = number("gradients applied")
    taken, stale = number("taken by the chief"), number("dropped as stale")
    assert taken + stale + number("after the last take") == applied <= 3 * 8
    assert taken >= 2 * 8
    # the progress lines (one a step) count the stale gradients as they are dropped
    lines = re.findall(r"^step +(\d+)/8 .* accepted (\d+)  stale (\d+) ", done.stderr, re.M)
    assert [int(step) for step, _, _ in lines] == list(range(1, 9)), done.stderr[-3000:]
    assert sum(int(accepted) for _, accepted, _ in lines) == taken
    assert sum(int(dropped) for _, _, dropped in lines) == stale
    losses = re.search(r"^loss\s+([\d.e+-]+) -> ([\d.e+-]+)", out, re.M)
    assert losses is not None and float(losses.group(2)) < float(losses.group(1))


def test_tf1_cluster_cannot_be_combined_with_other_modes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tf_accum", "--tf1-cluster", "--graph", "--no-plot"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--tf1-cluster cannot be combined with --processes or --graph" in done.stderr
