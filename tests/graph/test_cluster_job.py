"""A TF1 job's identity and the ClusterSpecs its processes may have, without Ray;
and the Server arguments TensorFlow refuses."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tf_accum import errors
from tf_accum.graph import cluster_job

SPEC = {"ps": ["ps0:2222", "ps1:2222"], "worker": ["w0:2222", "w1:2222"]}


def identity(spec: object) -> cluster_job.JobIdentity:
    return cluster_job.identity(tf.train.ClusterSpec(spec))


def text(spec: object) -> str:
    return cluster_job.spec_text(tf.train.ClusterSpec(spec))


def test_a_job_is_named_by_tf_accum_job_else_by_its_first_ps_tasks_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(cluster_job.JOB_VARIABLE, raising=False)
    ours = identity(SPEC)
    assert "'ps0:2222'" in ours.description
    # the same ps task 0: the same job (the rest of the spec is checked by the hosts)
    assert identity(dict(SPEC, worker=["other:1"])) == ours
    assert identity(dict(SPEC, ps=["ps9:2222", "ps1:2222"])) != ours
    assert cluster_job.first_task(tf.train.ClusterSpec({"worker": ["a:1"], "chief": ["c:1"]})) == (
        "chief",
        0,
    )
    monkeypatch.setenv(cluster_job.JOB_VARIABLE, "run-1")
    first = identity(SPEC)
    assert first != ours and "'run-1'" in first.description
    monkeypatch.setenv(cluster_job.JOB_VARIABLE, "run-2")
    assert identity(SPEC) != first
    name = cluster_job.host_name(first, "ps", 1)
    assert name == f"tf_accum/task/{first.key}/ps/1"


def test_cluster_specs_agree_only_when_they_can_be_one_jobs() -> None:
    assert cluster_job.disagreement(text(SPEC), text(dict(SPEC))) is None
    changed = cluster_job.disagreement(text(SPEC), text(dict(SPEC, worker=["w0:2222", "x:1"])))
    assert changed == "task /job:worker/task:1 is 'w1:2222' in one and 'x:1' in the other"
    longer = cluster_job.disagreement(text(SPEC), text(dict(SPEC, worker=["w0:2222"])))
    assert longer == "job 'worker' has tasks [0, 1] in one and [0] in the other"
    assert "different jobs" in str(cluster_job.disagreement(text(SPEC), text({"ps": SPEC["ps"]})))
    # a worker's sparse view, listing only itself, agrees; with another address it does not
    assert cluster_job.disagreement(text(SPEC), text(dict(SPEC, worker={1: "w1:2222"}))) is None
    assert cluster_job.disagreement(text(dict(SPEC, worker={1: "w1:2222"})), text(SPEC)) is None
    wrong = cluster_job.disagreement(text(SPEC), text(dict(SPEC, worker={1: "elsewhere:1"})))
    assert wrong == "task /job:worker/task:1 is 'w1:2222' in one and 'elsewhere:1' in the other"
    # copying a ClusterSpec keeps which jobs are sparse
    sparse = tf.train.ClusterSpec(dict(SPEC, worker={1: "w1:2222"}))
    assert tf.train.ClusterSpec(sparse).sparse_jobs() == {"worker"}


def test_a_ps_tasks_job_is_over_once_every_other_task_has_used_it_and_ended() -> None:
    w0, w1, chief = "/job:worker/task:0", "/job:worker/task:1", "/job:chief/task:0"
    ps0, ps1 = "/job:ps/task:0", "/job:ps/task:1"
    spec = text(SPEC)
    assert cluster_job.job_over(spec, set(), {ps0}) is None  # nobody has come yet
    assert cluster_job.job_over(spec, {w0}, {ps0}) is None  # worker 1 has not come yet
    assert cluster_job.job_over(spec, {w0, w1}, {ps0, w1}) is None  # worker 1 runs
    # the ps tasks' own processes do not count
    reason = cluster_job.job_over(spec, {w0, w1, ps1}, {ps0, ps1})
    assert reason == (
        "every task of the job that is not a ps task (/job:worker/task:0, /job:worker/task:1) "
        "has used it, and all of their processes have ended"
    )
    # every job that is not ps counts: a chief too
    with_chief = text(dict(SPEC, chief=["c0:2222"]))
    assert cluster_job.job_over(with_chief, {w0, w1}, set()) is None
    assert cluster_job.job_over(with_chief, {w0, w1, chief}, set()) is not None
    # a ps task's view listing some workers (a dict) waits for those
    assert cluster_job.job_over(text(dict(SPEC, worker={1: "w1:2222"})), {w1}, set()) is not None
    # no ClusterSpec, or no task but ps tasks: never over
    assert cluster_job.job_over(None, {w0, w1}, set()) is None
    assert cluster_job.job_over(text({"ps": ["a:1", "b:1"]}), {ps1}, set()) is None


def test_task_index_must_be_an_int_as_in_tensorflow() -> None:
    spec = {"worker": ["a-ti:1", "b-ti:1"]}
    # TensorFlow 2.21: TypeError, "'str' object cannot be interpreted as an integer"
    with pytest.raises(TypeError, match="'str' object cannot be interpreted as an integer"):
        tf.train.Server(spec, job_name="worker", task_index="1", start=False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        tf.train.Server(spec, job_name="worker", task_index=1.0, start=False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a bool"):
        tf.train.Server(spec, job_name="worker", task_index=True, start=False)
    server = tf.train.Server(spec, job_name="worker", task_index=np.int64(1), start=False)
    assert server.task_index == 1 and type(server.task_index) is int


def test_a_second_server_for_a_task_in_one_process_is_refused() -> None:
    spec = {"worker": ["first-dup:1", "second-dup:1"]}
    server = tf.train.Server(spec, job_name="worker", task_index=0, start=False)
    with pytest.raises(errors.UnknownError, match="already has a Server on grpc://first-dup:1"):
        tf.train.Server(spec, job_name="worker", task_index=0, start=False)
    with pytest.raises(errors.UnknownError, match="already has a Server"):
        tf.train.Server({"other": ["first-dup:1"]}, job_name="other", task_index=0, start=False)
    assert tf.Session(server.target).sess_str == server.target  # the first one still serves
    # port 0 asks for any free port (TensorFlow gives each server its own)
    assert tf.train.Server.create_local_server().target == "grpc://localhost:0"
    assert tf.train.Server.create_local_server().target == "grpc://localhost:0"
