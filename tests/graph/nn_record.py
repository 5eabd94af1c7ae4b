"""What the model-math tests share: TensorFlow's recorded outcomes of the
table's cases, tf_accum's outcome of a case compared with them, and the job
that checks the record against a live TensorFlow."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import tf_accum.compat.v1 as tf
from tests import background
from tests.graph.nn_table import CASES, RECORD, differences, outcome

ROOT = Path(__file__).resolve().parents[2]
RECORDED: dict[str, Any] = json.loads(RECORD.read_text())

LIVE_TENSORFLOW = (
    importlib.util.find_spec("tensorflow") is not None
    and os.environ.get("TF_ACCUM_BACKEND") != "tf_accum"
)


def cases_of(group: str) -> list[str]:
    return [name for name, case in CASES.items() if case.group == group]


def check_case(name: str) -> None:
    """tf_accum's outcome of case ``name`` is TensorFlow's (values within their
    dtype's rounding; random values and initial values bit for bit)."""
    got = outcome(tf, name)
    problems = differences(got, RECORDED["graph"][name], CASES[name].exact)
    assert not problems, problems[:3]


def live_record_job() -> str:
    """TensorFlow's outcomes today compared with the record, in a child process."""
    key = "model table: TensorFlow's outcomes against the record"
    if LIVE_TENSORFLOW:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
        background.define(key, [sys.executable, "-m", "tests.graph.nn_table", "--check"], env, 900)
    return key
