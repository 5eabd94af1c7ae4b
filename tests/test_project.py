"""The project as a user meets it: README commands and example, import cost, lint."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tf_accum as tfa
from tests import background

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

# the raw ops of TensorFlow's signatures, recorded from TensorFlow itself
SIGNATURES = json.loads((ROOT / "conformance" / "signatures.json").read_text())
RAW_OPS = sorted(name.split(".", 1)[1] for name in SIGNATURES if name.startswith("raw_ops."))


def test_raw_ops_exports_exactly_the_op_table() -> None:
    """Two op tables (tf_accum/raw_ops/op_table.py for the accumulators,
    tf_accum/raw_ops/training.py for the training ops) give the raw ops' names
    and graph mode's nodes; they hold exactly the ops TensorFlow's recorded
    signatures name, each exported and callable."""
    from tf_accum.raw_ops.op_table import OPS
    from tf_accum.raw_ops.training import TRAINING_OPS

    assert len(RAW_OPS) == 23 + 36
    assert sorted(tfa.raw_ops.__all__) == sorted([*OPS, *TRAINING_OPS]) == RAW_OPS
    for name in RAW_OPS:
        assert callable(getattr(tfa.raw_ops, name))


def test_readme_gives_both_commands_and_ci_runs_the_test_one() -> None:
    commands = re.findall(r"^    (python3 -m venv \.venv .*)$", README, re.M)
    assert len(commands) == 2
    assert commands[0].endswith("python -m tf_accum")
    assert commands[1].endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "grep -E '^    python3 -m venv \\.venv .*pytest' README.md" in ci


def test_readme_quickstart_runs(capsys) -> None:
    block = re.search(r"```python\n(.*?)```", README, re.S)
    assert block is not None
    exec(compile(block.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["2", "[2. 3.]", "Timed out waiting for notification"]
    assert out[-1] == "[3 7] [1. 2.] [1000    4]"


def test_main_job_trains() -> None:
    from tf_accum.examples.config import JobConfig
    from tf_accum.examples.sync_replicas import run

    outcome = run(JobConfig(workers=3, replicas_to_aggregate=2, steps=30, compute_ms=0))
    assert outcome.final_loss < 0.01 < outcome.initial_loss


def test_import_never_loads_tensorflow() -> None:
    code = (
        "import sys, tf_accum, tf_accum.compat.v1, tf_accum.raw_ops, tf_accum.distributed;"
        "import tf_accum.examples.sync_replicas, tf_accum.__main__;"
        "heavy = ('tensorflow', 'keras', 'torch', 'jax', 'ray', 'scipy', 'matplotlib', 'tqdm',"
        " 'numba', 'llvmlite');"
        "bad = [m for m in sys.modules if m.split('.')[0] in heavy];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


LINTERS = [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"]]


def _executable(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return shutil.which(name) or (str(beside) if beside.exists() else None)


def _lint_job(tool: list[str]) -> str:
    key = "lint: " + " ".join(tool)
    exe = _executable(tool[0])
    if exe is not None:
        background.define(key, [exe, *tool[1:]], timeout=900)
    return key


@pytest.mark.parametrize(
    "tool", [pytest.param(t, marks=pytest.mark.background(_lint_job(t))) for t in LINTERS]
)
def test_lint_is_clean(tool) -> None:
    if _executable(tool[0]) is None:
        pytest.fail(f"{tool[0]} is not installed: it is part of the test extra")
    done = background.result(_lint_job(tool))
    assert done.returncode == 0, done.stdout + done.stderr
