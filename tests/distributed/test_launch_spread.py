"""``python -m tf_accum.launch --spread``: the tasks started on the nodes of a cluster.

The session's cluster gets a second raylet (on this machine, 1 CPU, ended by
pid): the launcher joins the cluster and starts task k of the job on the
k-th node offering a CPU, round robin, where the main job's worker actors go.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from tests.distributed.conftest import Cluster
from tests.distributed.test_errors import extra_node
from tests.test_launch import GONE_WAIT, ROLE_PROGRAM, guide_program, launched
from tests.test_main_job_processes import processes_marked

# Seconds for a killed launcher's remote tasks to end: Ray learns of the driver's
# death and ends its actors, and the tasks with them.
REMOTE_GONE_WAIT = 30.0


def test_spread_starts_the_tasks_round_robin_over_the_nodes(
    tmp_path: Path, ray_cluster: Cluster
) -> None:
    program = tmp_path / "train.py"
    program.write_text(guide_program())
    token = {name: os.environ[name] for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    with extra_node(ray_cluster, num_cpus=1) as (node_id, _), launched(
        tmp_path, "--spread", "--address", ray_cluster.address, str(program),
        "--", "--steps", "5", extra_env=token,
    ) as launch:  # fmt: skip
        assert launch.finish() == 0, "\n".join(launch.err[-60:])
        started = "\n".join(line for line in launch.err if line.startswith("[launch] job "))
        nodes = dict(re.findall(r"(\w+) \(pid \d+ on node (\w+)\)", started))
        assert sorted(nodes) == ["ps0", "worker0", "worker1"]
        # task k on the k-th of the two nodes, round robin
        assert nodes["ps0"] == nodes["worker1"] != nodes["worker0"], (nodes, node_id)
        assert node_id[:8] in (nodes["ps0"], nodes["worker0"])
        assert "[worker0] step 5: loss 0.8658" in launch.out
        assert launch.left_running() == {}


def test_a_killed_spread_launchers_tasks_end(tmp_path: Path, ray_cluster: Cluster) -> None:
    """The launcher's death ends its task actors (Ray ends the actors a dead driver
    owned), and with them the tasks: Ray ends an exiting worker's child processes,
    and each task also gets its parent-death signal."""
    program = tmp_path / "role.py"
    program.write_text(ROLE_PROGRAM)
    token = {name: os.environ[name] for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    with extra_node(ray_cluster, num_cpus=1), launched(
        tmp_path, "--spread", "--address", ray_cluster.address, "--workers", "2",
        str(program), "--exit", "wait,wait", extra_env=token,
    ) as launch:  # fmt: skip
        for name in ("ps0", "worker0", "worker1"):
            launch.wait_for(rf"^\[{name}\] on stderr")
        launch.process.kill()
        launch.process.wait(GONE_WAIT)
        deadline = time.monotonic() + REMOTE_GONE_WAIT
        while (left := processes_marked(launch.marker)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, "tasks outlived their launcher"
