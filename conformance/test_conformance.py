"""The conformance suite under pytest.

- every case passes against tf_accum, and where no departure is listed behaves
  as TensorFlow's recorded (golden) outcomes, call for call;
- TensorFlow's golden outcomes meet every case's expectations except the
  listed departures, which must fail (so the list cannot rot);
- with TensorFlow installed: a live run (in a child process) meets the same
  expectations and agrees with the golden file, and every case marked as a
  crash really kills TensorFlow's process;
- signatures match TensorFlow's;
- another runtime named with ``--backend module:attribute`` meets every case
  (or, on a departing call, TensorFlow's recorded outcome).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance import signatures
from conformance.backends import make_backend, plugins, selected_backends
from conformance.case_format import Case, load_cases
from conformance.outcomes import meets, normalised_message, same_behaviour, same_message
from conformance.record import (
    GOLDEN_FILE,
    load_golden,
    record_command,
    record_in_subprocess,
    recording_failure,
)
from conformance.runner import run_case, runtime_failures
from conformance.xfails import load_xfails
from tests import background

CASES = load_cases()
XFAILS = load_xfails()
GOLDEN = load_golden()
ROOT = Path(__file__).resolve().parent.parent


def _ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    backends = selected_backends(metafunc.config.getoption("--backend"))
    if "tf_accum_case" in metafunc.fixturenames:
        cases = [c for c in CASES if not c.graph_only] if "tf_accum" in backends else []
        metafunc.parametrize("tf_accum_case", cases, ids=_ids(cases))
    if "tensorflow_case" in metafunc.fixturenames:
        run = "tensorflow" in backends
        cases = [c for c in CASES if run and not XFAILS.crashes_tensorflow(c.id)]
        live = [pytest.param(c, marks=pytest.mark.background(_live_job())) for c in cases]
        metafunc.parametrize("tensorflow_case", live, ids=_ids(cases))
    if "tensorflow_selected" in metafunc.fixturenames:
        metafunc.parametrize("tensorflow_selected", [True] if "tensorflow" in backends else [])
    if "graph_case" in metafunc.fixturenames:
        cases = CASES if "tf_accum-graph" in backends else []
        metafunc.parametrize("graph_case", cases, ids=_ids(cases))
    if "runtime_case" in metafunc.fixturenames:
        pairs = [
            (spec, case)
            for spec in plugins(backends)
            for case in CASES
            if _runtime(spec).supports(case)
        ]
        metafunc.parametrize("runtime_case", pairs, ids=[f"{s}-{c.id}" for s, c in pairs])
    if "crash_case" in metafunc.fixturenames:
        run = "tensorflow" in backends
        cases = [c for c in CASES if run and XFAILS.crashes_tensorflow(c.id)]
        crashes = [pytest.param(c, marks=pytest.mark.background(_crash_job(c))) for c in cases]
        metafunc.parametrize("crash_case", crashes, ids=_ids(cases))


_RUNTIMES: dict[str, Any] = {}


def _runtime(spec: str) -> Any:
    if spec not in _RUNTIMES:
        _RUNTIMES[spec] = make_backend(spec)
    return _RUNTIMES[spec]


def _expectation_failures(case: Case, records: list[dict[str, Any]]) -> list[str]:
    assert len(records) == len(case.statements), "records do not match the case's statements"
    failures = []
    for statement, record in zip(case.statements, records, strict=True):
        if statement.expect is None and not case.require_success:
            continue
        problem = meets(record, statement.expect)
        if problem:
            failures.append(f"line {statement.line}: {statement.text}: {problem}")
    return failures


def _check_tensorflow_outcome(case: Case, records: list[dict[str, Any]]) -> None:
    """TensorFlow fails exactly the calls listed as departures, and meets every other."""
    failures = _expectation_failures(case, records)
    departing = XFAILS.departing_lines(case.id)
    unexpected = [f for f in failures if _line_of(f) not in departing]
    assert not unexpected, "TensorFlow fails calls that list no departure:\n" + "\n".join(
        unexpected
    )
    failed = {_line_of(f) for f in failures}
    passing = sorted(line for line in departing if line not in failed)
    assert not passing, (
        f"{case.id}: calls on lines {passing} are listed as departures "
        f"({XFAILS.reason(case.id)}) but TensorFlow meets them"
    )


def _line_of(failure: str) -> int:
    return int(failure.split(":", 1)[0].removeprefix("line "))


def _golden_records(case: Case) -> list[dict[str, Any]]:
    entry = GOLDEN["cases"].get(case.id)
    assert entry is not None, f"no golden outcome for {case.id}: run python -m conformance.record"
    return entry["records"]  # type: ignore[no-any-return]


def test_on_tf_accum(tf_accum_case: Case) -> None:
    """Every expectation met; every call not listed as a departure behaves as
    TensorFlow's recorded call did, full (normalised) error message included."""
    case = tf_accum_case
    run = run_case(case, make_backend("tf_accum"))
    assert run.passed, "\n".join(run.failures)
    if XFAILS.crashes_tensorflow(case.id):
        return
    golden = _golden_records(case)
    differences = []
    for statement, ours, theirs in zip(case.statements, run.records, golden, strict=True):
        if XFAILS.call_reason(case.id, statement.line) is not None:
            continue
        problem = same_behaviour(ours, theirs)
        if problem is None and XFAILS.message_reason(case.id, statement.line) is None:
            problem = same_message(ours, theirs)
        if problem:
            differences.append(f"line {statement.line}: {statement.text}: {problem}")
    assert not differences, "tf_accum differs from TensorFlow:\n" + "\n".join(differences)


def test_on_runtime(runtime_case: tuple[str, Case]) -> None:
    """Another runtime (``--backend module:attribute``, conformance/backends/plugin.py)
    meets every case it can run; where a departure is listed it may instead
    behave as TensorFlow's recorded call did."""
    spec, case = runtime_case
    run = run_case(case, _runtime(spec))
    failures = runtime_failures(run, GOLDEN["cases"][case.id], XFAILS)
    assert not failures, f"{spec} fails {case.id}:\n" + "\n".join(failures)


def test_message_departures_really_differ() -> None:
    """A ``message:`` entry whose messages agree is stale."""
    stale = []
    for (case_id, line), _ in XFAILS.messages.items():
        case = next(c for c in CASES if c.id == case_id)
        index = [s.line for s in case.statements].index(line)
        ours = run_case(case, make_backend("tf_accum")).records[index]
        if same_message(ours, _golden_records(case)[index]) is None:
            stale.append(f"{case_id}:{line}")
    assert not stale


def _golden_message(message: str) -> str:
    """TensorFlow's kernel message, without the decoration graph mode adds."""
    from conformance.backends.tensorflow_backend import kernel_message

    return kernel_message(message).removeprefix("Graph execution error:\n\n")


def test_on_tf_accum_graph_mode(graph_case: Case) -> None:
    """The TF1 idiom (the TensorFlow backend's own code on tf_accum.compat.v1)
    meets every case and matches TensorFlow's graph-mode outcomes call for
    call, messages included: ours may add what was given after TensorFlow's text."""
    run = run_case(graph_case, make_backend("tf_accum-graph"))
    assert run.passed, "\n".join(run.failures)
    if XFAILS.crashes_tensorflow(graph_case.id):
        return
    differences = []
    golden = _golden_records(graph_case)
    for statement, ours, theirs in zip(graph_case.statements, run.records, golden, strict=True):
        if XFAILS.call_reason(graph_case.id, statement.line) is not None:
            continue  # a departing call; the case's other calls are still compared
        problem = same_behaviour(ours, theirs)
        departs = XFAILS.message_reason(graph_case.id, statement.line) is not None
        if problem is None and "message" in theirs and not departs:
            # private names count per process (a queue's "_<k>_fifo_queue")
            expected = normalised_message(_golden_message(theirs["message"]))
            if not normalised_message(ours["message"]).startswith(expected):
                problem = f"message {ours['message']!r} does not start with {expected!r}"
        if problem:
            differences.append(f"line {statement.line}: {statement.text}: {problem}")
    assert not differences, "graph mode differs from TensorFlow:\n" + "\n".join(differences)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_golden_describes_tensorflow(case: Case) -> None:
    entry = GOLDEN["cases"].get(case.id)
    assert entry is not None, f"no golden outcome for {case.id}: run python -m conformance.record"
    if "crash" in entry:
        assert XFAILS.crashes_tensorflow(case.id)
        return
    _check_tensorflow_outcome(case, entry["records"])


def test_golden_covers_exactly_the_cases() -> None:
    assert sorted(GOLDEN["cases"]) == sorted(_ids(CASES)), (
        "golden results are stale: run python -m conformance.record"
    )


def test_every_xfail_entry_matches_a_case() -> None:
    assert XFAILS.unmatched(CASES) == []


def test_tf_accum_signatures_match_the_golden_file() -> None:
    assert signatures.ours() == signatures.load()


LIVE_JOB = "conformance: record TensorFlow"


def _live_output() -> Path:
    return background.scratch() / "tensorflow-live.json"


def _live_job() -> str:
    """The live recording, a job (tests/background.py) run beside the other tests."""
    argv, env = record_command("tensorflow", _live_output())
    return background.define(LIVE_JOB, argv, env, timeout=1200)


@pytest.fixture(scope="session")
def live_tensorflow() -> dict[str, Any]:
    done = background.result(_live_job())
    if done.returncode == 0 and _live_output().exists():
        return json.loads(_live_output().read_text())  # type: ignore[no-any-return]
    # TensorFlow occasionally dies closing a session (record_in_subprocess): once more
    print(recording_failure("tensorflow", done), file=sys.stderr)
    return record_in_subprocess("tensorflow", attempts=1)


def _masked(record: dict[str, Any]) -> dict[str, Any]:
    if "message" not in record:
        return record
    return dict(record, message=normalised_message(record["message"]))


def test_on_tensorflow(tensorflow_case: Case, live_tensorflow: dict[str, Any]) -> None:
    records = live_tensorflow["cases"][tensorflow_case.id]["records"]
    _check_tensorflow_outcome(tensorflow_case, records)
    golden = _golden_records(tensorflow_case)
    assert len(golden) == len(records)
    for statement, live, recorded in zip(tensorflow_case.statements, records, golden, strict=True):
        problem = same_behaviour(live, recorded)
        assert problem is None, (
            f"line {statement.line}: golden and live TensorFlow disagree: {problem}"
        )
        assert _masked(live).get("message") == _masked(recorded).get("message"), (
            f"line {statement.line}: golden and live TensorFlow messages disagree"
        )


def _crash_job(case: Case) -> str:
    """Run the case alone against TensorFlow in a child process (tests/background.py)."""
    code = (
        "import sys; from conformance.case_format import load_cases;"
        "from conformance.runner import run_case;"
        "from conformance.backends import make_backend;"
        f"case = [c for c in load_cases() if c.id == {case.id!r}][0];"
        "run_case(case, make_backend('tensorflow')); print('SURVIVED')"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    return background.define(
        f"conformance: crash {case.id}", [sys.executable, "-c", code], env, 300
    )


def test_crash_case_crashes_tensorflow(crash_case: Case) -> None:
    """The case, run alone against TensorFlow in a child process, kills it.

    The wrong-dtype takes corrupt TensorFlow's heap: the process usually dies inside
    the case, and now and then only at exit, after the case printed SURVIVED. Both are
    a crash; a process that ends normally is not.
    """
    done = background.result(_crash_job(crash_case))
    assert done.returncode < 0, (
        f"{crash_case.id} is marked as a crash but TensorFlow survived it "
        f"(exit code {done.returncode}, statements "
        f"{'all ran' if 'SURVIVED' in done.stdout else 'did not all run'})"
    )


def test_tensorflow_signatures_match_the_golden_file(tensorflow_selected: bool) -> None:
    assert signatures.tensorflow_signatures() == signatures.load()


def test_golden_file_names_no_machine_paths() -> None:
    text = GOLDEN_FILE.read_text()
    assert 'File "' not in text and "site-packages" not in text
