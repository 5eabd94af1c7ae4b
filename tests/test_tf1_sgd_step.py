"""The TF1 SGD-step example (model math in the graph, ``w.assign(w - lr *
acc.take_grad(2))``) prints the same on TensorFlow and on tf_accum.

Each backend runs the program as a command in a child process (it calls
``disable_eager_execution()``, a process-wide switch); TensorFlow's run
happens only when it is installed and not excluded by ``TF_ACCUM_BACKEND``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf_accum_v1
from tests import background
from tf_accum.examples import tf1_sgd_step as example

ROOT = Path(__file__).resolve().parent.parent
CHILD_TIMEOUT = 300  # seconds; TensorFlow's import alone takes several


def _command_job(backend: str, *extra: str) -> str:
    """The program as a command, a job run beside the other tests (tests/background.py)."""
    argv = [sys.executable, "-m", "tf_accum.examples.tf1_sgd_step", f"--backend={backend}", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return background.define(f"tf1 sgd step: {' '.join(argv[3:])}", argv, env, CHILD_TIMEOUT)


def _command(backend: str, *extra: str) -> str:
    done = background.result(_command_job(backend, *extra))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _tensorflow_wanted() -> bool:
    chosen = os.environ.get("TF_ACCUM_BACKEND", "")
    wanted = not chosen or "tensorflow" in chosen.split(",")
    return wanted and importlib.util.find_spec("tensorflow") is not None


@pytest.mark.background(_command_job("tf_accum", "--json"))
def test_the_program_trains_toward_the_numpy_reference() -> None:
    outcome: dict[str, Any] = json.loads(_command("tf_accum", "--json").strip().splitlines()[-1])
    expected = example.reference()
    np.testing.assert_allclose(outcome["raw"]["losses"], expected["losses"], rtol=1e-5)
    np.testing.assert_allclose(outcome["raw"]["weights"], expected["weights"], rtol=1e-5)
    losses = outcome["losses"]
    assert len(losses) == 20 and losses[-1] < losses[0] / 100


@pytest.mark.background(_command_job("tf_accum"))
@pytest.mark.background(_command_job("tensorflow") if _tensorflow_wanted() else "")
def test_tensorflow_prints_the_same() -> None:
    if not _tensorflow_wanted():
        pytest.skip("no live TensorFlow (not installed, or excluded by TF_ACCUM_BACKEND)")
    ours = _command("tf_accum")
    assert ours.count("loss") == 20 and ours.splitlines()[-1].startswith("weights [1.4572")
    assert _command("tensorflow") == ours


def test_run_in_process_needs_no_process_wide_switch() -> None:
    first, second = example.run("tf_accum", steps=3), example.run("tf_accum", steps=3)
    assert first == second and len(first["losses"]) == 3


def test_the_program_uses_only_names_tf_accum_compat_v1_provides() -> None:
    used = set()
    for node in ast.walk(ast.parse(inspect.getsource(example))):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "tf"
        ):
            used.add(node.attr)
    assert {"reduce_sum", "reduce_mean", "square", "multiply", "zeros"} <= used
    assert used <= set(tf_accum_v1.__all__)
