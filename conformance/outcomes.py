"""What happened in a statement, as a JSON-able record, and how records compare.

Records: ``{"ok": true}``, ``{"value": .., "dtype": .., "shape": ..}``,
``{"components": [value records]}`` (a queue's dequeue),
``{"sparse": {"indices", "values", "dtype", "shape"}}``, ``{"error": class,
"message": text}``, ``{"blocked": true}``, ``{"literal": .., "type": ..}``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from conformance.case_format import Expect, Typed

Record = dict[str, Any]


def _plain(array: np.ndarray) -> Any:
    if array.dtype.kind == "c":
        return np.stack([array.real, array.imag], axis=-1).astype(np.float64).tolist()
    if array.dtype.kind not in "iub":
        array = array.astype(np.float64)
    return array.tolist()


def _dtype_name(dtype: Any) -> str:
    name = str(np.dtype(dtype))
    return "bfloat16" if name == "bfloat16" else name


def value_record(array: Any) -> Record:
    array = np.asarray(array)
    return {"value": _plain(array), "dtype": _dtype_name(array.dtype), "shape": list(array.shape)}


def record_result(result: Any) -> Record:
    """Turn whatever a call returned into a record (backend-independent)."""
    if result is None:
        return {"ok": True}
    fields = getattr(result, "_fields", None)
    if fields is not None and set(fields) >= {"indices", "values"}:
        shape = result.shape if "shape" in fields else result.dense_shape
        values = np.asarray(result.values)
        return {
            "sparse": {
                "indices": np.asarray(result.indices).tolist(),
                "values": _plain(values),
                "dtype": _dtype_name(values.dtype),
                "values_shape": list(values.shape),
                "shape": None if shape is None else np.asarray(shape).tolist(),
            }
        }
    if isinstance(result, (np.ndarray, np.generic)):
        return value_record(result)
    if (
        isinstance(result, list)
        and result
        and all(isinstance(r, (np.ndarray, np.generic)) for r in result)
    ):
        return {"components": [value_record(r) for r in result]}  # a queue's dequeue
    if isinstance(result, (str, bool, int, float)):
        return {"literal": result, "type": type(result).__name__}
    name = getattr(result, "name", None)
    if type(result).__name__ == "DType" and isinstance(name, str):
        return {"literal": name, "type": "DType"}
    return {"ok": True}


def error_record(error: BaseException) -> Record:
    return {"error": type(error).__name__, "message": str(error)}


def _same_values(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _typed_record(typed: Typed) -> Record:
    from conformance.backends.common import typed_array

    return value_record(typed_array(typed))


def _value_problem(record: Record, typed: Typed) -> str | None:
    want = _typed_record(typed)
    if "value" not in record or record["dtype"] != want["dtype"]:
        return f"expected {want}, got {record}"
    if record["shape"] != want["shape"] or not _same_values(record["value"], want["value"]):
        return f"expected {want}, got {record}"
    return None


def meets(record: Record, expect: Expect | None) -> str | None:
    """None when ``record`` satisfies ``expect``, else what is wrong."""
    if expect is None or expect.kind == "ok":
        if "error" in record or "blocked" in record:
            return f"expected success, got {record}"
        return None
    if expect.kind == "blocked":
        return None if "blocked" in record else f"expected BLOCKED, got {record}"
    if expect.kind == "record":
        # a generated case: TensorFlow's recorded outcome, call for call
        return same_behaviour(record, expect.value) or same_message(record, expect.value)
    if expect.kind == "error":
        if record.get("error") != expect.error:
            return f"expected {expect.error}({expect.message!r}), got {record}"
        if expect.message not in record.get("message", ""):
            return f"expected message containing {expect.message!r}, got {record['message']!r}"
        return None
    if expect.kind == "value":
        return _value_problem(record, expect.value)
    if expect.kind == "components":
        got = record.get("components")
        if got is None or len(got) != len(expect.value):
            return f"expected {len(expect.value)} components, got {record}"
        each = [_value_problem(r, v) for r, v in zip(got, expect.value, strict=True)]
        found = [f"component {i}: {p}" for i, p in enumerate(each) if p]
        return "; ".join(found) or None
    if expect.kind == "sparse":
        got = record.get("sparse")
        if got is None:
            return f"expected a sparse result, got {record}"
        want = expect.value
        values = _typed_record(want["values"])
        problems = []
        if got["indices"] != list(want["indices"]):
            problems.append(f"indices {got['indices']} != {want['indices']}")
        if got["dtype"] != values["dtype"] or got["values_shape"] != values["shape"]:
            problems.append(f"values {got['dtype']}{got['values_shape']} != "
                            f"{values['dtype']}{values['shape']}")  # fmt: skip
        elif not _same_values(got["values"], values["value"]):
            problems.append(f"values {got['values']} != {values['value']}")
        if "shape" in want and got["shape"] != list(want["shape"]):
            problems.append(f"shape {got['shape']} != {want['shape']}")
        return "; ".join(problems) or None
    # a plain literal
    if record.get("literal") == expect.value:
        return None
    if "value" in record and record["shape"] == [] and record["value"] == expect.value:
        return None
    return f"expected {expect.value!r}, got {record}"


def same_behaviour(ours: Record, theirs: Record) -> str | None:
    """Compare two backends' records: kind, error class, dtype, shape and values.

    Messages are not compared (TensorFlow decorates its own with node names);
    the cases' expectations check the parts of messages that matter.
    """
    if "error" in ours or "error" in theirs:
        if ours.get("error") == theirs.get("error"):
            return None
        return f"{ours} != {theirs}"
    # a literal's Python type may differ (docs/departures.md T13: dtype is a DType that
    # equals the string it was made from)
    a = {k: v for k, v in ours.items() if k not in ("message", "type")}
    b = {k: v for k, v in theirs.items() if k not in ("message", "type")}
    if a.keys() != b.keys():
        return f"{ours} != {theirs}"
    for key in a:
        if not _same_values_deep(a[key], b[key]):
            return f"{ours} != {theirs}"
    return None


def _same_values_deep(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_values_deep(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list) and any(isinstance(x, dict) for x in a):
        return len(a) == len(b) and all(_same_values_deep(x, y) for x, y in zip(a, b, strict=True))
    return _same_values(a, b)


def normalised_message(message: str) -> str:
    """A message with what legitimately varies between runs and modes masked.

    TensorFlow numbers private resources per process (``_<k>_name``), lists a
    node's attributes in no fixed order, and in graph mode may leave a bare
    "Graph execution error:" header in front of the kernel's message.
    """
    message = re.sub(r"^Graph execution error:\s*", "", message)
    message = re.sub(r"_\d+_", "_<k>_", message)
    return re.sub(
        r"with these attrs: \[(?:[^\[\]]|\[[^\]]*\])*\]", "with these attrs: [...]", message
    )


def same_message(ours: Record, theirs: Record) -> str | None:
    """Compare full error messages (normalised); None when they agree.

    tf_accum may follow TensorFlow's whole message with "; " and an
    explanation of its own (which argument, what it was, what was expected).
    """
    if "message" not in ours and "message" not in theirs:
        return None
    a = normalised_message(ours.get("message", ""))
    b = normalised_message(theirs.get("message", ""))
    if a == b or (b and a.startswith(b + "; ")):
        return None
    return f"message {a!r} != TensorFlow's {b!r}"
