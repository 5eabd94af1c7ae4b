"""A ps task's host goes on the node of the process that starts its Server.

The session's cluster gets a second raylet with a directory of its own; a
process attached to that raylet (Ray picks a driver's raylet by its
directory when several share a machine) makes the hosts of six ps tasks,
and the test process (on the head's raylet) six more. Each host must be on
its maker's node: a host asks for no CPU, and Ray ignores a soft node
preference for such an actor, so about half went to the other node.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid

from tests.distributed.conftest import PROCESS_WAIT, Cluster
from tests.distributed.test_errors import extra_node

HOSTS = 6

# Attaches to the raylet whose directory is argv[1], makes the hosts of ps tasks
# 0..HOSTS-1, and prints its node and each host's.
MAKER = """\
import json, sys
import ray
from tf_accum.distributed.connect import attach
from tf_accum.graph.cluster import ClusterSpec
from tf_accum.graph.cluster_runtime import ClusterRuntime

attach(sys.argv[1], _temp_dir=sys.argv[2])
count = int(sys.argv[3])
cluster = ClusterSpec({"ps": [f"ps{i}:1" for i in range(count)], "worker": ["w0:1"]})
hosts = []
runtimes = []  # the hosts live as long as their makers' runtimes
for index in range(count):
    runtime = ClusterRuntime(cluster, "ps", index)
    runtime.serve("ps", index)
    runtimes.append(runtime)
    hosts.append(ray.get(runtime.link("ps", index).actor.ping.remote())[2])
print(json.dumps({"here": ray.get_runtime_context().get_node_id(), "hosts": hosts}))
"""


def make_hosts_on_this_node() -> tuple[str, list[str]]:
    """This process's node, and the nodes of the hosts of HOSTS ps tasks it makes."""
    import ray

    from tf_accum.graph.cluster import ClusterSpec
    from tf_accum.graph.cluster_runtime import ClusterRuntime

    cluster = ClusterSpec(
        {"ps": [f"ps{i}-{uuid.uuid4().hex[:8]}:2" for i in range(HOSTS)], "worker": ["w0:2"]}
    )
    runtimes = [ClusterRuntime(cluster, "ps", index) for index in range(HOSTS)]
    nodes = []
    try:
        for index, runtime in enumerate(runtimes):
            runtime.serve("ps", index)
            link = runtime.link("ps", index)
            assert link is not None
            nodes.append(ray.get(link.actor.ping.remote())[2])
    finally:
        for index, runtime in enumerate(runtimes):
            link = runtime.link("ps", index)
            if link is not None:
                ray.kill(link.actor, no_restart=True)
    return ray.get_runtime_context().get_node_id(), nodes


def test_a_ps_tasks_host_goes_on_its_processs_node_on_a_cluster_of_two(
    ray_cluster: Cluster,
) -> None:
    temp_dir = tempfile.mkdtemp(prefix="tfn", dir="/tmp")
    try:
        with extra_node(ray_cluster, num_cpus=1, temp_dir=temp_dir) as (node_id, _):
            done = subprocess.run(
                [sys.executable, "-c", MAKER, ray_cluster.address, temp_dir, str(HOSTS)],
                env=ray_cluster.env(TF_ACCUM_JOB=uuid.uuid4().hex),
                capture_output=True,
                text=True,
                timeout=PROCESS_WAIT * 2,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            there = json.loads(done.stdout.splitlines()[-1])
            assert there["here"] == node_id  # the maker was on the second node
            assert there["hosts"] == [node_id] * HOSTS
            here, hosts = make_hosts_on_this_node()
            assert here != node_id
            assert hosts == [here] * HOSTS
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
