"""``python -m tf_accum.launch --spread``: each task's BLAS/OpenMP threads are its
node's cores shared among the job's tasks planned for that node.

The session's cluster gets a second raylet (on this machine, 1 CPU, ended by
pid): of three tasks, ps0 and worker1 go to one node and worker0 to the
other, so the two nodes share the same cores two ways and one way.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.distributed.conftest import Cluster
from tests.distributed.test_errors import extra_node
from tests.test_launch import ROLE_PROGRAM, launched
from tf_accum.launch.threads import THREAD_VARIABLES


def test_spread_tasks_share_the_cores_of_their_node(tmp_path: Path, ray_cluster: Cluster) -> None:
    program = tmp_path / "role.py"
    program.write_text(ROLE_PROGRAM)
    token = {name: os.environ[name] for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    with extra_node(ray_cluster, num_cpus=1), launched(
        tmp_path, "--spread", "--address", ray_cluster.address, "--workers", "2",
        str(program), "--exit", "0,0", extra_env=token, unset=THREAD_VARIABLES,
    ) as launch:  # fmt: skip
        assert launch.finish() == 0, "\n".join(launch.err[-60:])
        (line,) = [line for line in launch.err if line.startswith("[launch] job ")]
        nodes = dict(re.findall(r"(\w+) \(pid \d+ on node (\w+)\)", line))
        assert nodes["ps0"] == nodes["worker1"] != nodes["worker0"], line
        cores = len(os.sched_getaffinity(0))  # both nodes are this machine
        two, one = max(1, cores // 2), cores
        told = launch.tasks_told()
        for name, share in (("ps0", two), ("worker1", two), ("worker0", one)):
            assert told[name]["threads"] == dict.fromkeys(THREAD_VARIABLES, str(share)), name
        shared = f"{two} ({cores} core{'s' * (cores != 1)} / 2 tasks) on node {nodes['ps0']}"
        alone = f"{one} ({cores} core{'s' * (cores != 1)} / 1 task) on node {nodes['worker0']}"
        assert line.endswith(f"; BLAS/OpenMP threads per task: {shared}, {alone}"), line
        assert launch.left_running() == {}
