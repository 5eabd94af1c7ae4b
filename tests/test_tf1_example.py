"""The TF1 synchronous-replicas example runs unchanged on TensorFlow and on tf_accum.

The program as a command (which calls ``disable_eager_execution()``, a
process-wide switch) runs in a child process per backend; TensorFlow's run
happens only when it is installed and not excluded by ``TF_ACCUM_BACKEND``.
Both must give exactly what the numpy reference gives: gradients are on a grid
where float32 sums are exact, so thread order cannot change a bit.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tf_accum.compat.v1 as tf_accum_v1
from tests import background
from tf_accum.examples import tf1_sync_replicas as example

ROOT = Path(__file__).resolve().parent.parent
CHILD_TIMEOUT = 300  # seconds; TensorFlow's import alone takes several


def _backends() -> list[str]:
    chosen = os.environ.get("TF_ACCUM_BACKEND", "")
    names = ["tf_accum"]
    tensorflow_wanted = not chosen or "tensorflow" in chosen.split(",")
    if tensorflow_wanted and importlib.util.find_spec("tensorflow") is not None:
        names.append("tensorflow")
    return names


def _command_job(backend: str, variant: str, steps: int) -> str:
    """The program as a command, a job run beside the other tests (tests/background.py)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    argv = [
        sys.executable,
        "-m",
        "tf_accum.examples.tf1_sync_replicas",
        f"--backend={backend}",
        f"--variant={variant}",
        f"--steps={steps}",
        "--json",
    ]
    return background.define(f"tf1 example: {' '.join(argv[3:])}", argv, env, CHILD_TIMEOUT)


def _run_command(backend: str, variant: str, steps: int) -> dict[str, object]:
    done = background.result(_command_job(backend, variant, steps))
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


@pytest.mark.parametrize(
    ("backend", "variant"),
    [
        pytest.param(b, v, marks=pytest.mark.background(_command_job(b, v, steps=8)))
        for b in _backends()
        for v in example.VARIANTS
    ],
)
def test_command_gives_the_numpy_reference(backend: str, variant: str) -> None:
    outcome = _run_command(backend, variant, steps=8)
    expected = example.reference(variant, steps=8)
    assert outcome == expected
    # and the run did what it says: trained, dropped the stale gradients, timed out at the end
    assert outcome["applied"] == 4 * 8 and outcome["stale_sent"] == 7
    assert outcome["count_after_stale"] == 0 and outcome["last_take"] == "timed out"
    losses = outcome["losses"]
    assert isinstance(losses, list) and losses[-1] < losses[0] / 4


@pytest.mark.parametrize("variant", example.VARIANTS)
def test_run_in_process_is_reproducible(variant: str) -> None:
    # run() builds in its own Graph, so it needs no process-wide switch
    first = example.run("tf_accum", variant, workers=3, steps=5)
    second = example.run("tf_accum", variant, workers=3, steps=5)
    assert first == second
    assert first["global_step"] == 5 and first["applied"] == 15
    # three workers: the mean divides by 3, still exactly numpy's
    assert first == example.reference(variant, workers=3, steps=5)


def test_a_failing_worker_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    compute = example.gradient

    def failing(problem: example.Problem, worker: int, weights: object) -> object:
        if worker == 2:
            raise RuntimeError("worker 2 broke")
        return compute(problem, worker, weights)  # type: ignore[arg-type]

    monkeypatch.setattr(example, "gradient", failing)
    # the chief's take times out (it never gets 4 gradients) and reports the cause
    with pytest.raises(RuntimeError, match="worker 2 broke"):
        example.run("tf_accum", steps=3, timeout_ms=300)


def test_bad_backend_or_variant_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        example.run("torch")
    with pytest.raises(ValueError, match="variant must be one of"):
        example.run("tf_accum", "ragged")


def test_program_uses_only_names_tf_accum_compat_v1_provides() -> None:
    tree = ast.parse(inspect.getsource(example))
    used: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "tf"
        ):
            used.add(node.attr)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner = node.value
            if isinstance(inner.value, ast.Name) and inner.value.id == "tf":
                used.add(f"{inner.attr}.{node.attr}")
    assert {"placeholder", "Session", "RunOptions", "ConditionalAccumulator"} <= used
    for name in sorted(used):
        head, _, rest = name.partition(".")
        assert head in tf_accum_v1.__all__, name
        if rest:
            assert hasattr(getattr(tf_accum_v1, head), rest), name


README = (ROOT / "README.md").read_text()


def _graph_mode_section() -> str:
    found = re.search(r"^## TF1 graph mode\n(.*?)^## ", README, re.S | re.M)
    assert found is not None, "README has no TF1 graph mode section"
    return found.group(1)


def test_the_manual_lists_exactly_the_names_of_tf_accum_compat_v1() -> None:
    page = (ROOT / "docs" / "graph-mode.md").read_text()
    listing = re.search(r"<!-- names:.*?-->(.*?)<!-- end of names -->", page, re.S)
    assert listing is not None
    text = listing.group(1)
    while re.search(r"\([^()]*\)", text):  # methods are in brackets
        text = re.sub(r"\([^()]*\)", "", text)
    listed = set(re.findall(r"`([A-Za-z_][\w.]*)`", text))
    namespaces = {
        "train",
        "sparse",
        "nn",
        "losses",
        "random",
        "initializers",
        "summary",
        "math",
        "linalg",
    }
    exported = set(tf_accum_v1.__all__) - namespaces
    for namespace in namespaces:
        module = getattr(tf_accum_v1, namespace)
        exported |= {f"{namespace}.{n}" for n in module.__all__}
    assert listed == exported


def test_readme_graph_mode_example_runs() -> None:
    block = re.search(r"```python\n(.*?)```", _graph_mode_section(), re.S)
    assert block is not None
    # in a child: it disables eager execution for its whole process
    done = subprocess.run(
        [sys.executable, "-c", block.group(1)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["2", "[2. 3.]", "DeadlineExceededError"]
