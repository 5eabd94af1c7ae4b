"""The conformance suite on the Ray table: every case passes and matches the golden results."""

from __future__ import annotations

import logging

import pytest

from conformance.backends.tf_accum_ray_backend import TfAccumRayBackend
from conformance.case_format import Case
from conformance.outcomes import same_behaviour
from conformance.runner import run_case
from conformance.test_conformance import CASES, XFAILS, _golden_records, _ids

# Queues live in the process that uses them: the Ray table holds accumulators only
# (its create_queue is UnimplementedError), so the queue cases run in process only.
# The training ops' ref forms exist in graph mode only.
ON_RAY = [case for case in CASES if case.area != "queue" and not case.graph_only]


@pytest.mark.parametrize("case", ON_RAY, ids=_ids(ON_RAY))
def test_on_tf_accum_ray(case: Case, ray_cluster, caplog) -> None:
    caplog.set_level(logging.ERROR, "tf_accum")  # cases lower steps on purpose
    run = run_case(case, TfAccumRayBackend(ray_cluster.table))
    assert run.passed, "\n".join(run.failures)
    if XFAILS.reason(case.id) is not None or XFAILS.crashes_tensorflow(case.id):
        return
    differences = []
    for statement, ours, theirs in zip(
        case.statements, run.records, _golden_records(case), strict=True
    ):
        problem = same_behaviour(ours, theirs)
        if problem:
            differences.append(f"line {statement.line}: {statement.text}: {problem}")
    assert not differences, "tf_accum on Ray differs from TensorFlow:\n" + "\n".join(differences)
