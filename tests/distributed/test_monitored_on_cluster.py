"""MonitoredTrainingSession and Supervisor on a TF1 cluster: a non-chief process waits
for the chief's initialisation, says what it waits for, then trains.

The non-chief runs tests/distributed/monitored_roles.py in a process of its
own; it writes each "waiting" message to a file as well, so that the test
starts the chief (in this process, worker task 0) only once the non-chief
has found the model uninitialized at least once.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import tf_accum.compat.v1 as tf
from tests.distributed.monitored_roles import model
from tests.helpers import wait_until

ROLES = "tests.distributed.monitored_roles"
PROCESS_START = 90.0  # seconds for a process to join the cluster, on a loaded machine
LAST_STEP = 12


def cluster_of(workers: int) -> dict[str, list[str]]:
    tag = uuid.uuid4().hex[:8]
    return {
        "ps": [f"ps0-{tag}:2222"],
        "worker": [f"worker{i}-{tag}:2222" for i in range(workers)],
    }


def _chief_trains(spec: Any, checkpoint_dir: Path) -> int:
    server = tf.train.Server(spec, job_name="worker", task_index=0)
    g, step, w, train = model(spec)
    seen = 0
    with (
        g.as_default(),
        tf.train.MonitoredTrainingSession(
            master=server.target,
            is_chief=True,
            checkpoint_dir=str(checkpoint_dir),
            hooks=[tf.train.StopAtStepHook(last_step=LAST_STEP)],
            save_summaries_steps=None,
            log_step_count_steps=None,
        ) as sess,
    ):
        while not sess.should_stop():
            _, seen = sess.run([train, step])
    return int(seen)


@pytest.mark.parametrize("role", ["mts", "supervised"])
def test_a_non_chief_waits_for_the_chief_and_says_what_it_waits_for(
    ray_cluster: Any, spawn: Any, serve_ps: Any, tmp_path: Path, role: str
) -> None:
    spec = cluster_of(workers=2)
    serve_ps(spec)  # the ps task's host, made as its process makes it
    marker = tmp_path / "waiting"
    worker = spawn(role, module=ROLES, spec=spec, task=1, last_step=LAST_STEP, marker=str(marker))
    wait_until(marker.exists, PROCESS_START)
    assert _chief_trains(spec, tmp_path / "checkpoints") >= LAST_STEP - 1
    outcome = worker.outcome(PROCESS_START)
    assert outcome["waits"], "the non-chief did not say it was waiting"
    assert "Variables not initialized: global_step, w" in outcome["waits"][0]
    assert "since" in outcome["waits"][0]
    # it trained on the model the chief initialized, after the chief's steps
    assert outcome["ran"] >= 1 and outcome["step"] >= LAST_STEP
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")) is not None
