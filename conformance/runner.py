"""Playing a case against a backend, statement by statement."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from conformance.case_format import Case, Statement
from conformance.outcomes import Record, error_record, meets, record_result, same_behaviour

JOIN_WAIT = 10.0  # seconds; only reached when a take that should return does not


class Task:
    """A call running in a background thread."""

    def __init__(self, fn: Any) -> None:
        self.finished = threading.Event()
        self.record: Record | None = None

        def run() -> None:
            try:
                self.record = record_result(fn())
            except BaseException as exc:  # recorded, like any other outcome
                self.record = error_record(exc)
            finally:
                self.finished.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()


@dataclass
class CaseRun:
    case: Case
    records: list[Record] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def run_case(case: Case, backend: Any) -> CaseRun:
    """Run every statement; check each against its expectation."""
    run = CaseRun(case)
    session = backend.open()
    env: dict[str, Any] = {}
    tasks: dict[str, Task] = {}
    try:
        for statement in case.statements:
            record = _execute(statement, session, env, tasks)
            if "message" in record:
                record["message"] = session.clean_message(record["message"])
            run.records.append(record)
            if statement.expect is None and not case.require_success:
                continue
            problem = meets(record, statement.expect)
            if problem:
                run.failures.append(f"line {statement.line}: {statement.text}: {problem}")
    finally:
        session.finish()
        for task in tasks.values():
            task.finished.wait(JOIN_WAIT)
    return run


def _execute(
    statement: Statement, session: Any, env: dict[str, Any], tasks: dict[str, Task]
) -> Record:
    try:
        if statement.action == "call":
            assert statement.call is not None
            bound, shown = session.call(statement.call, env)
            if statement.bind:
                env[statement.bind] = bound
            return record_result(shown)
        if statement.action == "background":
            assert statement.call is not None and statement.bind
            task = Task(session.prepare(statement.call, env))
            tasks[statement.bind] = task
            session.settle(task)
            return {"ok": True}
        if statement.action == "attribute":
            assert statement.subject is not None
            name, attribute = statement.subject.split(".", 1)
            return record_result(getattr(env[name], attribute))
        if statement.action == "check":
            assert statement.subject is not None
            task = tasks[statement.subject]
            expect_blocked = statement.expect is not None and statement.expect.kind == "blocked"
            wait = session.probe_seconds if expect_blocked else JOIN_WAIT
            if not task.finished.wait(wait):
                return {"blocked": True}
            assert task.record is not None
            return task.record
        if statement.action == "close":
            session.close()
            return {"ok": True}
    except Exception as exc:
        return error_record(exc)
    raise AssertionError(f"unknown statement {statement.action}")


def runtime_failures(run: CaseRun, golden: dict[str, Any], xfails: Any) -> list[str]:
    """What a plug-in runtime got wrong in ``run``, TensorFlow's outcome beside each.

    A call passes when it meets the case's expectation; a call listed as a
    departure (docs/departures.md) also passes when it behaves as TensorFlow's
    recorded call did, so that a runtime may follow either tf_accum or
    TensorFlow there. ``golden`` is the golden file's entry for the case.
    """
    recorded = golden.get("records")
    failures = []
    for index, statement in enumerate(run.case.statements):
        if statement.expect is None and not run.case.require_success:
            continue
        ours = run.records[index]
        problem = meets(ours, statement.expect)
        if problem is None:
            continue
        theirs: Record | str = recorded[index] if recorded else "(its process crashed)"
        departs = (
            xfails.call_reason(run.case.id, statement.line) is not None
            or xfails.message_reason(run.case.id, statement.line) is not None
        )
        if departs and recorded and same_behaviour(ours, recorded[index]) is None:
            continue
        failures.append(f"line {statement.line}: {statement.text}: {problem}; TensorFlow: {theirs}")
    return failures
