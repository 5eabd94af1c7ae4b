"""The suite's own tools: the case parser and the expected-failure list."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from conformance.case_format import CaseSyntaxError, Typed, parse_file, parse_statement
from conformance.xfails import load_xfails


def test_statements_parse_without_evaluating(tmp_path: Path) -> None:
    path = tmp_path / "x.cases"
    path.write_text(
        "case A1 dense: title\n"
        "    a = ResourceConditionalAccumulator(dtype=float32, shape=[None, 2])\n"
        "    t = background(ResourceAccumulatorTakeGradient(handle=a, num_required=1, dtype=float32))\n"
        "    t => BLOCKED\n"
        '    q.take_grad(1.0) => TypeError("have: a-> b")\n'
        "    X(v=zeros([0, 2], float32), w=2**63 - 1) => f32([1, 2])\n"
    )
    (case,) = parse_file(path)
    assert [s.action for s in case.statements] == ["call", "background", "check", "call", "call"]
    assert case.statements[0].bind == "a" and case.statements[1].bind == "t"
    assert case.statements[3].expect.message == "have: a-> b"
    typed = case.statements[4].call.kwargs["v"]
    assert isinstance(typed, Typed) and typed.shape == (0, 2)
    assert case.statements[4].call.kwargs["w"] == 2**63 - 1


@pytest.mark.parametrize("text", ["import os", "a = __import__('os').system('true')", "x = 1 +"])
def test_anything_but_calls_and_literals_is_refused(text: str) -> None:
    with pytest.raises(CaseSyntaxError):
        parse_statement(text, 1, "test")


def test_xfail_groups_reasons_and_stale_entries(tmp_path: Path) -> None:
    path = tmp_path / "xfails.txt"
    path.write_text(
        "# header\n\n# T1: first reason\n# continued\nA1:3\nA2:7\nmessage: A1:4\n\n"
        "# T2: second\ncrash: X*\nZZ:1\n"
    )
    xfails = load_xfails(path)
    assert xfails.reason("A2") == "T1: first reason continued"
    assert xfails.call_reason("A2", 7) == "T1: first reason continued"
    assert xfails.call_reason("A2", 8) is None and xfails.departing_lines("A1") == {3}
    assert xfails.message_reason("A1", 4) == "T1: first reason continued"
    assert xfails.call_reason("A1", 4) is None
    assert xfails.reason("X07") == "T2: second" and xfails.crashes_tensorflow("X07")
    assert not xfails.crashes_tensorflow("A1")

    def case(case_id: str, *lines: int) -> SimpleNamespace:
        return SimpleNamespace(id=case_id, statements=[SimpleNamespace(line=n) for n in lines])

    assert xfails.unmatched([case("A1", 3, 4), case("A2", 6), case("X1")]) == ["A2:7", "ZZ:1"]


def test_an_entry_must_name_a_call(tmp_path: Path) -> None:
    path = tmp_path / "xfails.txt"
    path.write_text("# r\nA1\n")
    with pytest.raises(ValueError, match="is not ID:LINE"):
        load_xfails(path)


def test_an_entry_listed_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "xfails.txt"
    path.write_text("# r\nA1:1\nA1:1\n")
    with pytest.raises(ValueError, match="listed twice"):
        load_xfails(path)


def test_random_cases_carry_tensorflows_outcomes_and_a_wrong_result_fails() -> None:
    from conformance.backends import make_backend
    from conformance.case_format import Expect, load_cases
    from conformance.runner import run_case

    case = next(c for c in load_cases() if c.id == "R-dense-1")
    assert all(s.expect is not None and s.expect.kind == "record" for s in case.statements)
    assert run_case(case, make_backend("tf_accum")).passed
    for statement in case.statements:
        assert statement.expect is not None
        recorded = statement.expect.value
        if "value" in recorded and recorded["shape"]:
            statement.expect = Expect("record", value=dict(recorded, value=[99.0] * 3))
            break
    else:
        raise AssertionError("R-dense-1 takes nothing")
    run = run_case(case, make_backend("tf_accum"))
    assert not run.passed and "99.0" in run.failures[0]
