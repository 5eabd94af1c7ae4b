"""The conformance suite's TF1 idiom with every accumulator on a ps task (issue 24).

The graph backend's code runs in a session on a worker's Server target, its
ops built under ``tf.device("/job:ps/task:0")``: each case's accumulator ops
run on the ps task's host actor, and must meet every case and match
TensorFlow's graph-mode outcomes as the in-process graph mode does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from conformance.backends.tf_accum_ps_backend import TfAccumPsBackend
from conformance.case_format import Case
from conformance.outcomes import same_behaviour
from conformance.runner import run_case
from conformance.test_conformance import CASES, XFAILS, _golden_records, _ids


@pytest.fixture(scope="module")
def ps_backend(ray_cluster) -> Iterator[TfAccumPsBackend]:
    yield TfAccumPsBackend()


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_on_a_ps_task(case: Case, ps_backend: TfAccumPsBackend, caplog) -> None:
    caplog.set_level(logging.ERROR, "tf_accum")  # cases lower steps on purpose
    served = ps_backend.server.runtime.counts("ps", 0)["requests"]
    run = run_case(case, ps_backend)
    assert run.passed, "\n".join(run.failures)
    assert ps_backend.last is not None
    if ps_backend.last.runs:  # the case's runs went to the ps task's host
        assert ps_backend.server.runtime.counts("ps", 0)["requests"] > served
    if XFAILS.crashes_tensorflow(case.id):
        return
    differences = []
    golden = _golden_records(case)
    for statement, ours, theirs in zip(case.statements, run.records, golden, strict=True):
        if XFAILS.call_reason(case.id, statement.line) is not None:
            continue  # a departing call; the case's other calls are still compared
        problem = same_behaviour(ours, theirs)
        if problem:
            differences.append(f"line {statement.line}: {statement.text}: {problem}")
    assert not differences, "on a ps task differs from TensorFlow:\n" + "\n".join(differences)
