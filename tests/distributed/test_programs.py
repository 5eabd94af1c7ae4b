"""TF1 programs written as public ones are (tests/programs/), run as one process per task.

Each program runs on the test session's Ray cluster with tf_accum and is
compared with what TensorFlow 2.21 printed running the same program
(tests/programs/tensorflow.json, recorded by ``python -m tests.programs.runner``;
where TensorFlow is installed, a background job runs it again and must give
the recorded results). With every worker's gradient aggregated and no
initial tokens, each worker computes one gradient per step from that step's
weights, so losses and final weights match TensorFlow's within float
rounding; with backup workers, which gradients make a step depends on
timing, so the test checks that training happened and that tf_accum's stale
counts add up. A chief's Supervisor.stop() and MonitoredTrainingSession
close return at once on tf_accum; TensorFlow's wait out their grace period
(departure T28), as the recording shows.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.distributed.conftest import Cluster
from tests.live_tensorflow import live_job, live_result
from tests.programs import runner

RECORDED: dict[str, list[dict[str, Any]]] = json.loads(
    (Path(runner.__file__).parent / "tensorflow.json").read_text()
)
_LIVE_JOB = live_job(
    "TF1 programs: every program on TensorFlow", "tests.programs.runner", timeout=900
)
DETERMINISTIC = ("supervisor_mlp", "monitored_mlp", "embedding_sparse")


def run_on_tf_accum(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    return runner.run_job(
        name, "tf_accum", env=cluster.env(TF_ACCUM_JOB=f"programs-{uuid.uuid4()}")
    )


def assert_same_training(found: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Each worker's global step, per-step losses and final variables, within float rounding."""
    assert [w["task"] for w in found] == [w["task"] for w in expected]
    for mine, theirs in zip(found, expected, strict=True):
        assert mine["global_step"] == theirs["global_step"]
        np.testing.assert_allclose(mine["losses"], theirs["losses"], rtol=1e-5, atol=1e-6)
        assert sorted(mine["variables"]) == sorted(theirs["variables"])
        for name, value in theirs["variables"].items():
            np.testing.assert_allclose(
                mine["variables"][name], value, rtol=1e-5, atol=1e-6, err_msg=name
            )


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_a_program_trains_as_on_tensorflow(ray_cluster: Cluster, name: str) -> None:
    found = run_on_tf_accum(ray_cluster, name)
    assert_same_training(found, RECORDED[name])
    chief = found[0]
    # every gradient made a step: nothing stale, one take per step
    assert chief["stale_gradients"] == 0
    assert chief["steps_aggregated"] == chief["global_step"]
    if "stop_secs" in chief:
        # Supervisor.stop() on the chief: TensorFlow waits out stop_grace_secs for the
        # queue runner blocked in a take of a step no worker sends, then raises;
        # tf_accum cancels that take when the coordinator stops
        grace = RECORDED[name][0]["stop_grace_secs"]
        assert RECORDED[name][0]["stop"].startswith(
            "RuntimeError: Coordinator stopped with threads still running"
        )
        assert RECORDED[name][0]["stop_secs"] >= grace
        assert chief["stop"] == "stopped"
        assert chief["stop_secs"] < grace / 2
    if "close_secs" in chief:
        # closing a MonitoredTrainingSession: TensorFlow's chief waits out the grace
        # period for its queue runner, blocked in a take of a step no worker sends;
        # tf_accum cancels that take when the coordinator stops
        grace = RECORDED[name][0]["stop_grace_period_secs"]
        assert RECORDED[name][0]["close_secs"] >= grace
        assert chief["close_secs"] < grace / 2


@pytest.mark.background(_LIVE_JOB)
def test_tensorflow_still_gives_the_recorded_results() -> None:
    live = json.loads(live_result(_LIVE_JOB, "the recording covers it").stdout.splitlines()[-1])
    assert sorted(live) == sorted(RECORDED)
    for name in DETERMINISTIC:
        assert_same_training(live[name], RECORDED[name])


def test_a_backup_workers_stale_gradients_are_dropped_and_counted(ray_cluster: Cluster) -> None:
    found = run_on_tf_accum(ray_cluster, "backup_workers")
    tensorflow = RECORDED["backup_workers"]
    steps = tensorflow[0]["global_step"]
    chief, fast, slow = found
    assert [w["global_step"] for w in found] == [steps] * 3
    for worker in found:  # every worker reads the same final weights
        assert worker["variables"] == chief["variables"]
    # training happened, as on TensorFlow: the chief's first loss is at the initial
    # weights (nothing can make a step before its first gradient), the last far lower
    np.testing.assert_allclose(chief["losses"][0], tensorflow[0]["losses"][0], rtol=1e-6)
    assert chief["final_loss"] < 0.5 * chief["losses"][0]
    assert tensorflow[0]["final_loss"] < 0.5 * tensorflow[0]["losses"][0]
    # the counts add up: one take per step; each step aggregated at least
    # replicas_to_aggregate (2) gradients, every one of the slow worker's is stale
    # (all but its last may have arrived after the chief's last update)
    runs = chief["runs"] + fast["runs"] + slow["runs"]
    assert chief["steps_aggregated"] == steps
    assert slow["runs"] >= 1 and tensorflow[2]["runs"] >= 1
    assert slow["runs"] - 1 <= chief["stale_gradients"] <= runs - 2 * steps


def embedding_reference(outcomes: list[dict[str, Any]], rate: float = 0.5) -> dict[str, Any]:
    """embedding_sparse's training in numpy, with departure T5's sparse mean: a row's
    repeats within one worker's gradient are summed and count as one contribution,
    and each row's mean is over the workers that touched it; then Adagrad."""
    start = outcomes[0]["initial"]
    values = {name: np.array(value, np.float64) for name, value in start.items()}
    slots = {name: np.full_like(value, 0.1) for name, value in values.items()}  # Adagrad's
    emb, w, b = values["embeddings"], values["weights"], values["bias"]
    losses: list[list[float]] = [[] for _ in outcomes]
    for step in range(outcomes[0]["global_step"]):
        grads_w, grads_b = [], []
        row_sum, row_count = np.zeros_like(emb), np.zeros(len(emb))
        for index, worker in enumerate(outcomes):
            ids = np.array(worker["batches"]["ids"][step])
            y = np.array(worker["batches"]["labels"][step])
            bag = emb[ids].sum(axis=1)
            logits = bag @ w[:, 0] + b[0]
            losses[index].append(
                float(np.mean(np.maximum(logits, 0) - logits * y + np.log1p(np.exp(-abs(logits)))))
            )
            residual = (1 / (1 + np.exp(-logits)) - y) / len(y)
            grads_w.append(bag.T @ residual)
            grads_b.append(residual.sum())
            rows = np.zeros_like(emb)
            np.add.at(rows, ids.ravel(), np.repeat(residual[:, None] * w[:, 0], ids.shape[1], 0))
            touched = np.unique(ids)
            row_sum[touched] += rows[touched]
            row_count[touched] += 1
        dense = {"weights": np.mean(grads_w, axis=0)[:, None], "bias": np.array([np.mean(grads_b)])}
        for name, grad in dense.items():
            slots[name] += grad**2
            values[name] -= rate * grad / np.sqrt(slots[name])
        seen = row_count > 0
        grad = row_sum[seen] / row_count[seen, None]
        slots["embeddings"][seen] += grad**2
        emb[seen] -= rate * grad / np.sqrt(slots["embeddings"][seen])
    return {"losses": losses, "variables": values}


def test_an_embeddings_repeated_ids_are_summed_and_averaged_per_row(ray_cluster: Cluster) -> None:
    # ids that repeat within a batch and come in no order: TensorFlow's sparse
    # accumulator mis-merges them (departure T5), so the reference is numpy's
    env = ray_cluster.env(TF_ACCUM_JOB=f"programs-{uuid.uuid4()}")
    found = runner.run_job("embedding_sparse", "tf_accum", env=env, arguments=["--repeated_ids"])
    ids = np.array(found[0]["batches"]["ids"])
    assert any(len(np.unique(batch)) < batch.size for batch in ids)  # repeats, as meant
    expected = embedding_reference(found)
    for index, worker in enumerate(found):
        np.testing.assert_allclose(worker["losses"], expected["losses"][index], rtol=1e-5)
        for name, value in expected["variables"].items():
            np.testing.assert_allclose(
                worker["variables"][name], value, rtol=1e-4, atol=1e-6, err_msg=name
            )
    assert found[0]["stale_gradients"] == 0
    assert found[0]["steps_aggregated"] == found[0]["global_step"] == 4
