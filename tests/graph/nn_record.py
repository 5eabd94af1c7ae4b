"""What the model-math tests share: TensorFlow's recorded outcomes of the
table's cases, tf_accum's outcome of a case compared with them, and the job
that checks the record against a live TensorFlow."""

from __future__ import annotations

import json
from typing import Any

import tf_accum.compat.v1 as tf
from tests.graph.nn_table import CASES, RECORD, differences, outcome
from tests.live_tensorflow import live_job

RECORDED: dict[str, Any] = json.loads(RECORD.read_text())


def cases_of(group: str) -> list[str]:
    return [name for name, case in CASES.items() if case.group == group]


def check_case(name: str) -> None:
    """tf_accum's outcome of case ``name`` is TensorFlow's (values within their
    dtype's rounding; random values and initial values bit for bit)."""
    got = outcome(tf, name)
    problems = differences(got, RECORDED["graph"][name], CASES[name].exact)
    assert not problems, problems[:3]


# TensorFlow's outcomes today compared with the record, in a child process
LIVE_JOB = live_job(
    "model table: TensorFlow's outcomes against the record",
    "tests.graph.nn_table",
    "--check",
    timeout=900,
)
