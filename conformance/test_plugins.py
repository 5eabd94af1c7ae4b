"""The plug-in point: another runtime runs the whole suite against itself.

tests/runtime_adapters.py holds two runtimes: tf_accum's raw ops behind
opaque handles and foreign result types (with the compat classes), and the
same with one deliberate bug and no compat classes.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from pathlib import Path

import pytest

from conformance import __main__ as report
from conformance.backends import make_backend, plugin, selected_backends
from conformance.case_format import load_cases
from tests import background

ROOT = Path(__file__).resolve().parent.parent
WORKING = "tests.runtime_adapters:runtime"
BROKEN = "tests.runtime_adapters:broken"
CASES = load_cases()
GRAPH_ONLY = [c.id for c in CASES if c.graph_only]  # not applicable to an eager runtime
COMPAT_CASES = [
    c.id
    for c in CASES
    if not c.graph_only
    and any(s.call and s.call.target.startswith("compat.") for s in c.statements)
]


def _totals(out: str) -> list[int]:
    line = next(line for line in out.splitlines() if line.startswith("all "))
    return [int(n) for n in line.split()[1:]]


def _failing_ids(out: str) -> set[str]:
    line = next(line for line in out.splitlines() if line.startswith("runtime FAILS: "))
    return set(line.removeprefix("runtime FAILS: ").split(", "))


def test_report_on_a_working_runtime(capsys) -> None:
    report.main(["--backend", WORKING])
    out = capsys.readouterr().out
    assert f"runtime: {WORKING}" in out
    cases, passed, _, _, _, not_applicable = _totals(out)
    assert cases == len(CASES) and not_applicable == len(GRAPH_ONLY) > 0
    assert passed == cases - not_applicable
    assert "FAILS" not in out


@pytest.fixture(scope="module")
def broken_report() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        report.main(["--backend", BROKEN])
    assert exit_.value.code == 1
    return out.getvalue()


def test_report_on_a_broken_runtime_lists_its_failures_beside_tensorflow(broken_report) -> None:
    out = broken_report
    cases, passed, _, _, _, not_applicable = _totals(out)
    assert not_applicable == len(COMPAT_CASES) + len(GRAPH_ONLY) > len(GRAPH_ONLY)
    failing = _failing_ids(out)
    assert failing and passed == cases - not_applicable - len(failing)
    assert not failing & set(COMPAT_CASES)
    # each failure: the call, what was expected and got, and TensorFlow's recorded outcome
    s20 = out.split("\nS20:\n", 1)[1].split("\n\n", 1)[0]
    assert "AccumulatorNumAccumulated(" in s20
    found = re.search(
        r"expected \{'value': (\d+).*got \{'value': (\d+).*; TensorFlow: (\{.*\})", s20
    )
    assert found is not None, s20
    expected, got, tensorflow = int(found[1]), int(found[2]), found[3]
    assert got == expected + 1 and f"'value': {expected}" in tensorflow
    assert "TensorFlow: (its process crashed)" in out.split("\nX05:\n", 1)[1]


def _pytest_job() -> str:
    """The one command, a job run beside the other tests (tests/background.py)."""
    env = dict(os.environ, TF_ACCUM_BACKEND=BROKEN, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "pytest", "conformance/test_conformance.py", "-q", "-k",
            "test_on_runtime", "-p", "no:cacheprovider", "-rf"]  # fmt: skip
    return background.define("conformance: pytest on a broken runtime", argv, env, 600)


@pytest.mark.background(_pytest_job())
def test_pytest_runs_the_suite_against_a_runtime_in_one_command(broken_report) -> None:
    expected = _failing_ids(broken_report)
    done = background.result(_pytest_job())
    assert done.returncode == 1, done.stdout[-2000:]
    failed = set(
        re.findall(rf"FAILED \S+test_on_runtime\[{re.escape(BROKEN)}-(\S+)\]", done.stdout)
    )
    assert failed == expected
    ran = len(CASES) - len(COMPAT_CASES) - len(GRAPH_ONLY)
    assert f"{len(expected)} failed, {ran - len(expected)} passed" in done.stdout


def test_a_runtime_is_named_by_module_attribute_or_entry_point(monkeypatch) -> None:
    from tests import runtime_adapters

    assert selected_backends(f"tf_accum,{WORKING}") == ["tf_accum", WORKING]
    assert make_backend(WORKING).runtime is runtime_adapters.runtime
    monkeypatch.setattr(plugin, "registered", lambda: {"adapted": WORKING})
    assert selected_backends("adapted") == ["adapted"]
    assert make_backend("adapted").runtime is runtime_adapters.runtime


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_here:runtime", "cannot import module 'no_such_module_here'"),
        ("tests.runtime_adapters:nothing", "has no attribute 'nothing'"),
        ("numpy:", "is not a runtime: it has no ResourceConditionalAccumulator"),
    ],
)
def test_a_bad_runtime_name_says_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        make_backend(spec)


def test_an_unknown_plain_name_is_refused() -> None:
    with pytest.raises(ValueError, match="or name a runtime as module:attribute"):
        selected_backends("tensorflw")
