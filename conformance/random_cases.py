"""Seeded random sequences of accumulator calls, dense and sparse.

Their expectations are TensorFlow's recorded outcomes (the golden file), call
for call: a value, sparse result, error class and full (normalised) message
that differs fails the case, on either backend. Indices are
sorted and unique (TensorFlow mis-merges anything else, decisions T5) and
values small integers, so sums are exact in float32.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from conformance.case_format import Case, Expect, parse_statement

GOLDEN_FILE = Path(__file__).parent / "golden" / "tensorflow.json"

SEEDS = range(1, 9)


def _dense(seed: int) -> Case:
    rng = random.Random(seed)
    lines = [f"a = ResourceConditionalAccumulator(dtype=float32, shape=[3], "
             f"reduction_type={rng.choice(['MEAN', 'SUM'])!r})"]  # fmt: skip
    step = 0
    for _ in range(rng.randint(10, 25)):
        roll = rng.random()
        if roll < 0.6:
            local = step + rng.randint(-2, 2)
            value = [rng.randint(-9, 9) for _ in range(3)]
            lines.append(f"ResourceAccumulatorApplyGradient(handle=a, local_step={local}, "
                         f"gradient=f32({value}))")  # fmt: skip
        elif roll < 0.7:
            step = rng.randint(-1, 6)
            lines.append(f"ResourceAccumulatorSetGlobalStep(handle=a, new_global_step={step})")
        elif roll < 0.85:
            lines.append("ResourceAccumulatorNumAccumulated(handle=a)")
        else:
            lines.append(f"ResourceAccumulatorTakeGradient(handle=a, "
                         f"num_required={rng.randint(1, 3)}, dtype=float32, timeout=0.05)")  # fmt: skip
            step += 1  # only if it completed; a stale guess just makes more stale gradients
    return _case(f"R-dense-{seed}", "random", f"random dense sequence, seed {seed}", lines)


def _sparse(seed: int) -> Case:
    rng = random.Random(1000 + seed)
    lines = [f"s = SparseConditionalAccumulator(dtype=float32, shape=[8, 2], "
             f"reduction_type={rng.choice(['MEAN', 'SUM'])!r})"]  # fmt: skip
    for _ in range(rng.randint(10, 25)):
        roll = rng.random()
        if roll < 0.65:
            indices = sorted(rng.sample(range(8), rng.randint(0, 4)))
            values = [[rng.randint(-9, 9), rng.randint(-9, 9)] for _ in indices]
            known = rng.random() < 0.5
            shape = "[8, 2]" if known else "[]"
            lines.append(
                f"SparseAccumulatorApplyGradient(handle=s, local_step={rng.randint(-1, 3)}, "
                f"gradient_indices={indices}, gradient_values=f32({values or 'zeros([0, 2], float32)'}), "
                f"gradient_shape={shape}, has_known_shape={known})"
            )
        elif roll < 0.75:
            lines.append(
                f"AccumulatorSetGlobalStep(handle=s, new_global_step={rng.randint(-1, 3)})"
            )
        elif roll < 0.85:
            lines.append("AccumulatorNumAccumulated(handle=s)")
        else:
            lines.append(f"SparseAccumulatorTakeGradient(handle=s, "
                         f"num_required={rng.randint(1, 3)}, dtype=float32, timeout=0.05)")  # fmt: skip
    return _case(f"R-sparse-{seed}", "random", f"random sparse sequence, seed {seed}", lines)


def _case(case_id: str, area: str, title: str, lines: list[str]) -> Case:
    case = Case(case_id, area, title, "random_cases.py", require_success=False)
    for number, text in enumerate(lines, 1):
        text = text.replace("f32(zeros([0, 2], float32))", "zeros([0, 2], float32)")
        case.statements.append(parse_statement(text, number, f"{case_id}:{number}"))
    return case


def _expect_golden(case: Case, golden: dict[str, Any]) -> Case:
    """Give every call of ``case`` TensorFlow's recorded outcome as its expectation."""
    entry = golden.get(case.id)
    records = entry.get("records") if entry else None
    if records is None or len(records) != len(case.statements):
        return case  # not recorded yet (or stale): the golden-coverage test says so
    for statement, record in zip(case.statements, records, strict=True):
        statement.expect = Expect("record", value=record)
    return case


def random_cases() -> list[Case]:
    cases = [_dense(s) for s in SEEDS] + [_sparse(s) for s in SEEDS]
    try:
        golden = json.loads(GOLDEN_FILE.read_text())["cases"]
    except (OSError, ValueError, KeyError):
        golden = {}
    return [_expect_golden(case, golden) for case in cases]
