"""A program that ends while a daemon thread's run waits on a ps task ends cleanly.

As a SyncReplicasOptimizer chief's program ends while its queue runner waits for
the next gradients: Ray disconnects the process at exit while the thread still
runs. The process must end with the program's own status (a Ray object freed
after the disconnect makes Ray end it with status 1) and must not attach to Ray
again from that thread (a Ray call after the disconnect does, with ``ray.init()``
and no address). A real process on the test session's Ray cluster
(tests/distributed/tf1_roles.py); every process is killed by pid after the test.
"""

from __future__ import annotations

from tests.distributed.test_tf1_cluster import cluster_of

ROLES = "tests.distributed.tf1_roles"
PROCESS_START = 90.0  # seconds for a process to join the cluster, on a loaded machine


def test_a_program_that_ends_while_a_take_waits_in_a_thread_exits_with_status_0_and_no_attach(
    spawn,
) -> None:
    spec = cluster_of(ps=1, workers=1)
    spawn("ps", module=ROLES, spec=spec, task=0)
    ending = spawn("end_while_taking", module=ROLES, spec=spec, task=0)
    assert ending.outcome(PROCESS_START) == {"waiting": True}  # and exit status 0
    assert "late attach" not in ending.error_output()
