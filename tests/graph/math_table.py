"""The table of graph-mode math cases, and how one case's outcome is found.

A case is an expression over ``tf`` (``tf_accum.compat.v1`` or
``tensorflow.compat.v1``), ``np`` and two builders: ``T(dtype, values)`` a
constant tensor, ``P(dtype, shape)`` a placeholder. It is built in a fresh
Graph; its outcome is the build-time error (class and message), or the
result's dtype and static shape and, when nothing is to be fed, its value or
the run-time error. The same code finds TensorFlow's outcomes (recorded in
``math_tensorflow.json`` by ``python -m tests.graph.math_table --record``;
without ``--record`` it prints them)
and tf_accum's.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

RECORD = Path(__file__).with_name("math_tensorflow.json")

DTYPES = ("float16", "float32", "float64", "int32", "int64")
OPERATORS = ("+", "-", "*", "/", "//", "%", "**")
# What a program puts on the other side of a tensor.
OTHERS = (
    "2", "0.5", "2.0", "True", "2**40", "None", "'a'", "[1, 2]", "[1.5, 2]",
    "np.float64(2.5)", "np.int64(2)", "np.array([1.5, 2.0])", "np.array([1, 2], np.int32)",
)  # fmt: skip
LEFT = "[3, -7]"
RIGHT = "[2, 3]"
MORE_DTYPES = ("int8", "int16", "uint8", "uint16", "uint32", "uint64", "bfloat16", "complex64")


def _grid() -> list[str]:
    cases = []
    for op in OPERATORS:
        for left in DTYPES:
            for right in DTYPES:
                cases.append(f"T('{left}', {LEFT}) {op} T('{right}', {RIGHT})")
            for other in OTHERS:
                cases.append(f"T('{left}', {LEFT}) {op} {other}")
                if not (op == "%" and other == "'a'"):  # str formatting, not an operator
                    cases.append(f"{other} {op} T('{left}', {LEFT})")
    for dtype in DTYPES + MORE_DTYPES + ("bool",):
        values = "[True, False]" if dtype == "bool" else "[3, 7]" if "u" in dtype else LEFT
        cases += [
            f"-T('{dtype}', {values})",
            f"abs(T('{dtype}', {values}))",
            f"tf.negative(T('{dtype}', {values}))",
            f"tf.square(T('{dtype}', {values}))",
            f"T('{dtype}', {values}) / 2",
            f"T('{dtype}', {values}) + 1",
        ]
    for function in ("multiply", "subtract", "divide"):
        for left in DTYPES:
            tensor = f"T('{left}', {LEFT})"
            others = [f"T('{right}', {RIGHT})" for right in DTYPES]
            for other in others + ["2", "0.5", "np.array([1.5, 2.0])"]:
                cases.append(f"tf.{function}({tensor}, {other})")
                if not other.startswith("T("):
                    cases.append(f"tf.{function}({other}, {tensor})")
    matrix = "[[1, 2], [3, -4]]"
    for dtype in DTYPES + ("uint8", "int8", "complex64"):
        for function in ("reduce_sum", "reduce_mean"):
            cases += [
                f"tf.{function}(T('{dtype}', {matrix}))",
                f"tf.{function}(T('{dtype}', {matrix}), axis=0)",
                f"tf.{function}(T('{dtype}', {matrix}), axis=[1], keepdims=True)",
            ]
    for dtype in DTYPES + ("uint8", "bool", "string", "complex64"):
        cases += [
            f"tf.zeros([2, 1], tf.{dtype})",
            f"tf.zeros_like(T('{dtype}', [[3, 7]]) if '{dtype}' not in ('bool', 'string') "
            f"else tf.zeros([1, 2], tf.{dtype}))",
        ]
        if dtype != "string":
            cases += [
                f"tf.ones([2, 1], tf.{dtype})",
                f"tf.ones_like(tf.zeros([1, 2], tf.{dtype}))",
                f"tf.ones_like(P('{dtype}', [None, 2]))",
            ]
    return cases


SPECIAL = [
    # integer division by zero, negative powers, overflow: found when run
    "T('int32', [3, -7]) // 0",
    "T('int32', [3, -7]) % 0",
    "T('float32', [3, -7]) // 0",
    "T('float32', [3, -7]) % 0",
    "T('int32', [3, -7]) / 0",
    "T('float64', [1.0, -1.0]) // 0.1",
    "T('float32', [5.0, -5.0]) % T('float32', [-3.0, 3.0])",
    "T('int32', [7, -7]) % T('int32', [-2, 3])",
    "T('int32', [-2**31]) // -1",
    "-T('int32', [-2**31])",
    "T('int32', [2, 3]) ** T('int32', [31, 0])",
    "T('int32', [2, 3]) ** -1",
    "T('uint8', [3, 7]) + 300",
    "T('int8', [3, 7]) + 200",
    "T('float16', [3, 7]) + 1e10",
    "T('float32', [3, -7]) + 1j",
    "T('float32', [3, -7]) - 1j",
    "T('complex64', [3, -7]) + 0.5",
    "T('complex64', [3, -7]) // 2",
    "T('complex64', [3, -7]) % 2",
    "T('int32', [3, -7]) / 'a'",
    "T('string', [b'a', b'b']) + T('string', [b'c', b'd'])",
    "T('string', [b'a', b'b']) * T('string', [b'c', b'd'])",
    "T('bool', [True, False]) * T('bool', [True, True])",
    "T('bool', [True, False]) * True",
    "False * T('bool', [True, False])",
    "T('bool', [True, False]) * 1",
    "T('bool', [True, False]) * [[True], [False]]",
    # broadcasting, static shapes
    "T('float32', [3, -7]) + [[1], [2], [3]]",
    "T('float32', [3, -7]) + [1, 2, 3]",
    "T('float32', [3, -7]) * [1, 2, 3]",
    "[1, 2, 3] * T('float32', [3, -7])",
    "T('float32', [3, -7]) / [1, 2, 3]",
    "T('int32', [3, -7]) / [1, 2, 3]",
    "T('float32', [[1, 2, 3]]) + T('float32', [[[1], [2]]])",
    "P('float32', [None, 2]) + T('float32', [[1], [2], [3]])",
    "P('float32', None) + T('float32', [[1], [2], [3]])",
    "P('float32', [None]) + P('float32', [None])",
    "P('float32', [None]) + P('float32', [1])",
    "P('float32', [None]) + P('float32', [3])",
    "P('float32', [None, 1]) + P('float32', [2, None])",
    "P('float32', [2, None]) + P('float32', [4, 3])",
    "P('float32', [None, 2]) - P('float32', [None, 3])",
    "0.1 * P('float32', [None, 3])",
    "-P('float32', [None, 3])",
    "abs(P('float64', None))",
    "tf.placeholder_with_default(np.zeros(2, np.float32), [None]) + "
    "tf.placeholder_with_default(np.zeros(3, np.float32), [None])",
    # the functions
    "tf.multiply(2, T('float32', [3, -7]))",
    "tf.multiply(0.5, T('int32', [3, -7]))",
    "tf.multiply(T('int32', [3, -7]), 0.5)",
    "tf.multiply(T('int32', [3, -7]), T('float32', [3, -7]))",
    "tf.multiply(T('float32', [3, -7]), 0.5)",
    "tf.multiply(0.5, T('float32', [3, -7]))",
    "tf.multiply(2, 3)",
    "tf.multiply(2.0, 3)",
    "tf.multiply(2, 3.0)",
    "tf.multiply(T('float32', [3, -7]), None)",
    "tf.multiply(T('float32', [3, -7]), [1, 2, 3])",
    "tf.multiply(T('float32', [3, -7]), 2, name='scaled')",
    "tf.subtract(0.5, T('int32', [3, -7]))",
    "tf.subtract(T('int32', [3, -7]), 0.5)",
    "tf.subtract(T('float64', [3, -7]), np.array([1, 2], np.int32))",
    "tf.subtract(2, 3)",
    "tf.divide(1, 2)",
    "tf.divide(1, T('int32', [3, -7]))",
    "tf.divide(T('int32', [3, -7]), 2)",
    "tf.divide(0.5, T('int32', [3, -7]))",
    "tf.divide(T('int32', [3, -7]), 0.5)",
    "tf.divide(T('int32', [3, -7]), T('float32', [3, -7]))",
    "tf.divide(T('float32', [3, -7]), 4)",
    "tf.divide(T('int32', [3, -7]), 2, name='d')",
    "tf.negative(2)",
    "tf.negative(2.5)",
    "tf.negative([1, 2])",
    "tf.square(2.5)",
    "abs(T('complex64', [3, -4]))",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]))",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=0)",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=1, keepdims=True)",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=-1)",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=[0, 1])",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=[])",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=2)",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=-3)",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=[0, 0])",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=1.0)",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), reduction_indices=0)",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), axis=0, keep_dims=True)",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), "
    "axis=tf.placeholder_with_default(np.int32(5), []))",
    "tf.reduce_sum(T('float32', [[1, 2], [3, 4]]), "
    "axis=tf.placeholder_with_default(np.int32(1), []))",
    "tf.reduce_sum(T('int32', [[1, 2], [3, 4]]))",
    "tf.reduce_sum(T('uint8', [200, 100]))",
    "tf.reduce_sum(T('float16', [4000] * 20))",
    "tf.reduce_sum(T('bool', [True, True]))",
    "tf.reduce_sum([[1.0, 2], [3, 4]])",
    "tf.reduce_sum(P('float32', None), axis=0)",
    "tf.reduce_sum(P('float32', [None, 3]), axis=0)",
    "tf.reduce_sum(P('float32', [None, 3]))",
    "tf.reduce_sum(P('float32', [2, 3]), axis=P('int32', []))",
    "tf.reduce_mean(T('float32', [[1, 2], [3, 4]]))",
    "tf.reduce_mean(T('float32', [[1, 2], [3, 4]]), axis=0)",
    "tf.reduce_mean(T('float32', [[1, 2], [3, 4]]), axis=1, keepdims=True)",
    "tf.reduce_mean(T('int32', [[1, 2], [3, 4]]))",
    "tf.reduce_mean(T('int32', [[1, 2], [3, 4]]), axis=0)",
    "tf.reduce_mean(T('int32', [-3, -4]))",
    "tf.reduce_mean(T('int32', [2**30, 2**30, 2**30]))",
    "tf.reduce_mean(T('float16', [[1, 2], [3, 4]]), axis=0)",
    "tf.reduce_mean(T('float16', [4000] * 20))",
    "tf.reduce_mean(T('float32', np.zeros((0, 2))))",
    "tf.reduce_mean(T('int32', np.zeros((0, 2))))",
    "tf.reduce_mean(T('float64', [[1, 2], [3, 4]]), axis=5)",
    "tf.zeros([2, 3])",
    "tf.zeros([2, 3], dtype=tf.int32)",
    "tf.zeros([2], 'int64')",
    "tf.zeros([])",
    "tf.zeros(3)",
    "tf.zeros([2], tf.bool)",
    "tf.zeros([2], tf.string)",
    "tf.zeros(T('int32', [2, 2]))",
    "tf.zeros([None])",
    "tf.ones([2, 3])",
    "tf.ones((2,), 'int32')",
    "tf.ones([2], tf.bool)",
    "tf.ones([2, 1], tf.float16, name='filled')",
    "tf.zeros_like(T('int32', [2, 3]))",
    "tf.zeros_like(T('int32', [2, 3]), dtype=tf.float32)",
    "tf.zeros_like([1.0, 2.0])",
    "tf.zeros_like(P('float32', [None, 3]))",
    "tf.ones_like(T('float16', [2, 3]))",
    "tf.ones_like(T('float16', [2, 3]), dtype='int64')",
    "tf.ones_like(T('bool', [True]))",
    "tf.ones_like(P('int64', [None]))",
]


def _add_cases() -> list[str]:
    """tf.add: ``x`` fixes the dtype, ``y`` is converted with it as a hint (so
    numpy values are cast), unlike the operators' left-to-right rules."""
    cases = []
    for left in DTYPES:
        tensor = f"T('{left}', {LEFT})"
        cases += [f"tf.add({tensor}, T('{right}', {RIGHT}))" for right in ("float32", "int32")]
        for other in OTHERS:
            cases += [f"tf.add({tensor}, {other})", f"tf.add({other}, {tensor})"]
    return cases + [
        "tf.add(T('string', [b'a', b'b']), T('string', [b'c', b'd']))",
        "tf.add(T('string', [b'a']), 'x')",
        "tf.add(T('bool', [True]), True)",
        "tf.add(T('uint8', [3, 7]), 300)",
        "tf.add(T('float32', [3, -7]), 1j)",
        "tf.add(T('float32', [1, 2]), T('float32', [1, 2, 3]))",
        "tf.add(2, 3)",
        "tf.add(2, 3.5)",
        "tf.add(0.5, [1, 2])",
        "tf.add(T('float32', [1, 2]), 1.0, name='total')",
        "tf.add(T('complex64', [1, 2]), 0.5)",
        "tf.add(T('int8', [1, 2]), 1)",
    ]


CASES = _grid() + SPECIAL + _add_cases()

# Eager mode: the functions act at once (tf_accum returns numpy arrays).
EAGER_CASES = [
    "tf.multiply(np.array([1.5, 2.0], np.float32), 0.5)",
    "tf.multiply(np.array([1, 2], np.int32), 3)",
    "tf.multiply(2, 3.0)",
    "tf.subtract(np.array([1, 2], np.int32), 0.5)",
    "tf.subtract(0.5, [1, 2])",
    "tf.subtract(np.array([1.0, 2.0]), [1, 2])",
    "tf.divide(1, 2)",
    "tf.divide(np.array([3, 4], np.int16), 2)",
    "tf.divide(np.array([3.0], np.float16), np.array([2.0], np.float16))",
    "tf.negative(np.array([1, -2], np.int64))",
    "tf.negative(np.array([1, 2], np.uint8))",
    "tf.square(3)",
    "tf.square(np.array([1.5], np.float32))",
    "tf.reduce_sum(np.array([[1, 2], [3, 4]], np.float32), axis=0)",
    "tf.reduce_sum([[1, 2], [3, 4]], axis=1, keepdims=True)",
    "tf.reduce_sum(np.array([[1, 2], [3, 4]], np.float32), axis=2)",
    "tf.reduce_mean([1, 2, 4])",
    "tf.reduce_mean(np.array([1.0, 2.0, 4.0]))",
    "tf.zeros(2)",
    "tf.zeros([2, 1], tf.int64)",
    "tf.ones([2], 'float16')",
    "tf.zeros_like(np.array([1, 2]))",
    "tf.ones_like([1.5, 2.5], dtype=tf.int32)",
    "tf.add(np.array([1.5, 2.0], np.float32), 0.5)",
    "tf.add(np.array([1, 2], np.int32), 0.5)",
    "tf.add(2, 3.0)",
    "tf.add(0.5, [1, 2])",
    "tf.add(np.array([1.0, 2.0]), [1, 2])",
    "tf.add(np.array([1], np.int32), np.array([1], np.int64))",
    "tf.add('a', 'b')",
    "tf.add(np.array([1], np.uint8), 300)",
    "tf.add(None, 1)",
]


def _check_python_ints(values: Any, kind: Any) -> None:
    """numpy 2's refusal of a Python int its integer dtype cannot hold, on every numpy
    (older ones only warn, and the table's cases are recorded with numpy 2)."""
    if kind is object or np.dtype(kind).kind not in "iu":
        return
    info = np.iinfo(kind)
    for value in np.array(values, dtype=object).reshape(-1):
        if isinstance(value, int) and not info.min <= value <= info.max:
            raise OverflowError(f"Python integer {value} out of bounds for {np.dtype(kind).name}")


def outcome(tf: Any, expression: str) -> dict[str, Any]:
    """What building (and, with nothing to feed, running) ``expression`` gives."""
    graph = tf.Graph()
    with graph.as_default():
        placeholders = []

        def make_tensor(dtype: str, values: Any) -> Any:
            kind = object if dtype == "string" else tf.as_dtype(dtype).as_numpy_dtype
            _check_python_ints(values, kind)
            return tf.constant(np.array(values, dtype=kind))

        def make_placeholder(dtype: str, shape: Any) -> Any:
            placeholders.append(shape)
            return tf.placeholder(tf.as_dtype(dtype), shape=shape)

        names = {"tf": tf, "np": np, "T": make_tensor, "P": make_placeholder}
        try:
            result = eval(expression, names)  # the case is the expression, as written
        except Exception as error:  # every build-time error is part of the outcome
            return {"error": type(error).__name__, "message": str(error)}
        if not hasattr(result, "op"):  # Python's own operator answered
            return {"python": type(result).__name__, "value": repr(result)}
        found: dict[str, Any] = {
            "dtype": result.dtype.name,
            "shape": None if result.shape.rank is None else list(result.shape.as_list()),
            "op": result.op.type,
            "name": result.op.name,
        }
        if placeholders:
            return found
        with tf.Session(graph=graph) as session:
            try:
                found["value"] = _plain(session.run(result))
            except tf.errors.OpError as error:
                found["run_error"] = type(error).__name__
                # the kernel's message; TensorFlow's lists its kernels on further lines
                found["message"] = _kernel_message(error.message).split("\n")[0]
    return found


def eager_outcome(tf: Any, expression: str) -> dict[str, Any]:
    """What ``expression`` gives at once, in eager mode."""
    try:
        result = eval(expression, {"tf": tf, "np": np})
    except Exception as error:
        # the core: TensorFlow names the op and its signature around it
        message = re.sub(r"^\{\{function_node [^}]*\}\} ", "", str(error))
        return {"error": type(error).__name__, "message": message.split(" [Op:")[0].split("\n")[0]}
    array = np.asarray(result)
    return {"dtype": array.dtype.name, "shape": list(array.shape), "value": _plain(array)}


def outcomes(tf: Any) -> dict[str, dict[str, Any]]:
    """Every case's outcome: the graph table, and the eager one."""
    graph = {case: outcome(tf, case) for case in CASES}
    return {"graph": graph, "eager": {case: eager_outcome(tf, case) for case in EAGER_CASES}}


def _kernel_message(message: str) -> str:
    from conformance.backends.tensorflow_backend import kernel_message

    return kernel_message(message)


def _plain(value: Any) -> Any:
    """A fetched value as JSON: lists of numbers, NaN and infinities as strings."""
    array = np.asarray(value)
    if array.dtype.kind == "c":
        return [[_number(z.real), _number(z.imag)] for z in array.reshape(-1).tolist()]
    if array.dtype.kind in "OSU":
        return [v.decode() if isinstance(v, bytes) else v for v in array.reshape(-1).tolist()]
    flat = [
        _number(v)
        for v in array.astype(
            np.float64 if array.dtype.kind == "f" or array.dtype.name == "bfloat16" else array.dtype
        )
        .reshape(-1)
        .tolist()
    ]
    return flat


def _number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def tensorflow_outcomes() -> dict[str, dict[str, Any]]:
    """Every case's outcome on TensorFlow (eager by default, so the graph cases
    build in their own Graphs)."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tensorflow

    return outcomes(tensorflow.compat.v1)


if __name__ == "__main__":
    found = tensorflow_outcomes()
    if "--record" in sys.argv:
        RECORD.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(found['graph'])} + {len(found['eager'])} cases", file=sys.stderr)
    else:
        print(json.dumps(found, sort_keys=True))
