"""Checking a recording of TensorFlow's outcomes against a live TensorFlow.

A test file keeps TensorFlow's outcomes in a recording and compares tf_accum
with it; when TensorFlow is installed (and ``TF_ACCUM_BACKEND`` does not say
``tf_accum`` alone), a child process runs the recording's program on
TensorFlow today (a tests/background.py job), and a test compares its output
with the recording.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import background

ROOT = Path(__file__).resolve().parents[1]

LIVE_TENSORFLOW = (
    importlib.util.find_spec("tensorflow") is not None
    and os.environ.get("TF_ACCUM_BACKEND") != "tf_accum"
)


def live_job(key: str, module: str, *args: str, timeout: float = 600) -> str:
    """Defines the background job ``key``, ``python -m module args`` with TensorFlow
    importable, when there is a live TensorFlow; returns ``key`` (for
    ``pytest.mark.background``)."""
    if LIVE_TENSORFLOW:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
        background.define(key, [sys.executable, "-m", module, *args], env, timeout)
    return key


def live_result(key: str, covered_by: str = "") -> subprocess.CompletedProcess[str]:
    """The finished job ``key``, which must have exited with 0; skips the test when
    there is no live TensorFlow (``covered_by`` says which checks stand for it)."""
    note = f"; {covered_by}" if covered_by else ""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip(f"TensorFlow is not installed (the oracle extra){note}")
    if os.environ.get("TF_ACCUM_BACKEND") == "tf_accum":
        pytest.skip(f"TF_ACCUM_BACKEND=tf_accum: no live TensorFlow{note}")
    done = background.result(key)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def last_json_line(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON value the job printed last."""
    return json.loads(done.stdout.strip().splitlines()[-1])
