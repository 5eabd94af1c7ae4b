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
            "--quiet",
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
    # each gradient is taken by the chief or dropped as stale
    applied = number("gradients applied")
    assert number("taken by the chief") + number("dropped as stale") == applied <= 3 * 8
    assert number("taken by the chief") >= 2 * 8
    assert number("after the last take") == 0
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
