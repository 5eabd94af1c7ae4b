"""The table of model-math and gradient cases, and how one case's outcome is found.

A case is an expression over ``tf`` (``tf_accum.compat.v1`` or
``tensorflow.compat.v1``), ``np`` and these builders of inputs:
``C(dtype, values)`` a constant, ``P(dtype, values)`` a placeholder of the
values' shape (or of ``shape=``), ``U(dtype, values)`` a placeholder of unknown shape (both fed
the values), ``V(dtype, values)`` an initialized variable; and
``G(ys, xs, **arguments)``, a call of ``tf.gradients`` whose result is the
outcome. The expression is built in a fresh Graph. Its outcome is the
build-time error class, or the result's op type, dtype, static shape and
value (or run-time error class), and, when the result is a float, its
gradients (``tf.gradients``) with respect to every float input, in the order
the inputs were made. A gradient is None, a dense value, or an IndexedSlices'
indices, values and dense shape.

``EAGER_CASES`` are expressions over numpy values, acting at once; ``PROGRAMS``
are small training programs (a network and an embedding regression, a few
steps of gradient descent), whose losses are their outcome.
TensorFlow's outcomes are recorded in ``model_tensorflow.json`` by
``python -m tests.graph.model_table --record``; without ``--record`` the
module compares a live TensorFlow with that record and exits 1 on a difference.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

RECORD = Path(__file__).with_name("model_tensorflow.json")
FLOATS = ("float16", "float32", "float64", "bfloat16")
INTS = ("int32", "int64")

M23 = "[[1.5, -2.0, 0.5], [3.0, 0.25, -1.0]]"
M32 = "[[0.5, 1.0], [-1.5, 2.0], [0.25, -0.75]]"
POS = "[[1.5, 2.0, 0.5], [3.0, 0.25, 4.0]]"


def _elementwise() -> list[str]:
    cases = []
    for dtype in FLOATS:
        x = f"P('{dtype}', {POS})"
        signed = f"P('{dtype}', {M23})"
        for fn in ("sqrt", "rsqrt", "exp", "log", "log1p", "reciprocal"):
            cases.append(f"tf.{fn}({x})")
        for fn in ("abs", "negative", "sign", "square"):
            cases.append(f"tf.{fn}({signed})")
        row = f"P('{dtype}', [2.0, -1.0, 0.5])"
        col = f"P('{dtype}', [[2.0], [-3.0]])"
        for fn in ("add", "subtract", "multiply", "divide", "truediv", "maximum", "minimum"):
            cases.append(f"tf.{fn}({signed}, {row})")
            cases.append(f"tf.{fn}({col}, {row})")
        cases.append(f"tf.pow({x}, P('{dtype}', [2.0, 0.5, 3.0]))")
        cases.append(f"tf.realdiv({signed}, {col})")
        cases.append(f"tf.floordiv({signed}, {row})")
        cases.append(f"tf.floormod({signed}, {row})")
        cases.append(f"{signed} * {row} - {col} / 2.0")
        cases.append(f"tf.add_n([{signed}, {signed}, C('{dtype}', {M23})])")
    for dtype in INTS + ("int8", "int16", "uint8"):
        a = f"C('{dtype}', [[7, 2, 9], [4, 5, 6]])"
        b = f"C('{dtype}', [3, 2, 4])"
        for fn in (
            "add",
            "subtract",
            "multiply",
            "maximum",
            "minimum",
            "floordiv",
            "floormod",
            "truediv",
            "div",
            "realdiv",
            "pow",
            "equal",
            "less",
            "greater_equal",
        ):
            cases.append(f"tf.{fn}({a}, {b})")
        for fn in ("sqrt", "exp", "abs", "sign", "square", "reciprocal", "negative"):
            cases.append(f"tf.{fn}({a})")
    cases += [
        "tf.maximum(P('float32', [1.0, 2.0, 3.0]), P('float32', [1.0, 1.0, 4.0]))",
        "tf.minimum(P('float32', [1.0, 2.0, 3.0]), P('float32', [1.0, 1.0, 4.0]))",
        "tf.maximum(P('float32', [[1.0, 5.0]]), 2.0)",
        "tf.pow(P('float32', [0.0, -2.0, 3.0]), P('float32', [2.0, 2.0, 2.0]))",
        "tf.sqrt(P('float32', [0.0, 4.0]))",
        "tf.log(P('float32', [0.0, 1.0]))",
        "tf.abs(P('float32', [0.0, -1.0]))",
        "tf.add(U('float32', [[1.0, 2.0], [3.0, 4.0]]), U('float32', [10.0, 20.0]))",
        "tf.multiply(U('float32', [[1.0], [2.0]]), U('float32', [[1.0, 2.0, 3.0]]))",
        "tf.divide(U('float64', [[1.0], [2.0]]), P('float64', [4.0, 8.0]))",
        "tf.add(P('float32', []), P('float32', [1.0, 2.0]))",
        "tf.multiply(P('float32', 3.0), P('float32', 2.0))",
        "tf.add(P('float32', np.zeros((0, 3))), P('float32', [1.0, 2.0, 3.0]))",
        "tf.multiply(P('float32', np.zeros((2, 0))), P('float32', np.zeros((1, 0))))",
        "tf.add(P('float32', [1.0, 2.0]), P('float32', [1.0, 2.0, 3.0]))",
        "tf.add(U('float32', [1.0, 2.0]), U('float32', [1.0, 2.0, 3.0]))",
        "tf.sqrt(C('int32', [4]))",
        "tf.equal(C('string', [b'a', b'b']), C('string', [b'a', b'c']))",
        "tf.not_equal(P('float32', [1.0, 2.0]), 2.0)",
        "tf.less(P('float32', [1.0, 2.0]), 2.0)",
        "tf.less_equal(P('float32', [1.0, 2.0]), 2.0)",
        "tf.greater(P('float32', [1.0, 2.0]), 2.0)",
        "tf.greater_equal(P('float32', [1.0, 2.0]), 2.0)",
        "tf.logical_and(C('bool', [True, False, True]), C('bool', [True, True, False]))",
        "tf.logical_or(C('bool', [True, False, False]), False)",
        "tf.logical_not(C('bool', [True, False]))",
        "tf.logical_xor(C('bool', [True, False, True]), C('bool', [True, True, False]))",
        "tf.logical_and(C('int32', [1]), C('bool', [True]))",
        "tf.less(C('bool', [True]), C('bool', [False]))",
        "P('float32', [1.0, 2.0]) < 1.5",
        "P('float32', [1.0, 2.0]) >= 1.0",
        "~C('bool', [True, False])",
        "C('bool', [True, False]) & C('bool', [True, True])",
        "C('bool', [True, False]) | C('bool', [False, False])",
        "tf.cast(P('float32', [1.7, -2.5]), tf.int32)",
        "tf.cast(P('float32', [1.7, -2.5]), tf.float64) * 2.0",
        "tf.cast(P('float64', [1.7, -2.5]), tf.float16)",
        "tf.cast(tf.cast(P('float32', [1.7, -2.5]), tf.int32), tf.float32)",
        "tf.add_n([P('float32', [1.0, 2.0])])",
        "tf.add_n([P('float32', [1.0, 2.0]), P('float32', [1.0, 2.0, 3.0])])",
        "tf.add_n([C('int32', [1, 2]), C('int32', [3, 4])])",
        "tf.add_n([C('bool', [True])])",
        "tf.add_n([])",
        "tf.sign(P('float32', [-2.0, 0.0, 3.0]))",
    ]
    return cases


def _matmul() -> list[str]:
    cases = []
    for dtype in FLOATS + INTS:
        a = f"P('{dtype}', [[1, 2, 3], [4, 5, 6]])"
        b = f"P('{dtype}', [[1, -1], [0, 2], [3, 1]])"
        cases.append(f"tf.matmul({a}, {b})")
    for dtype in ("float32", "float64"):
        a = f"P('{dtype}', {M23})"
        b = f"P('{dtype}', {M32})"
        at = f"P('{dtype}', {M32})"
        bt = f"P('{dtype}', {M23})"
        cases += [
            f"tf.matmul({a}, {b})",
            f"tf.matmul({at}, {b}, transpose_a=True)",
            f"tf.matmul({a}, {bt}, transpose_b=True)",
            f"tf.matmul({at}, {bt}, transpose_a=True, transpose_b=True)",
            f"tf.matmul({a}, {bt}, adjoint_b=True)",
            f"tf.matmul(U('{dtype}', {M23}), U('{dtype}', {M32}))",
        ]
    cases += [
        "tf.matmul(P('float32', np.arange(12.0).reshape(2, 2, 3)), "
        "P('float32', np.arange(6.0).reshape(3, 2)))",
        "tf.matmul(P('float32', np.arange(12.0).reshape(2, 3, 2)), "
        "P('float32', np.arange(12.0).reshape(2, 3, 2)), transpose_a=True)",
        "tf.matmul(P('float32', np.ones((2, 1, 2, 3))), P('float32', np.ones((3, 3, 2))))",
        f"tf.matmul(P('float32', {M23}), P('float32', {M23}))",
        f"tf.matmul(U('float32', {M23}), U('float32', {M23}))",
        f"tf.matmul(P('float32', {M23}), P('float64', {M32}))",
        "tf.matmul(P('float32', [1.0, 2.0]), P('float32', [[1.0], [2.0]]))",
        "tf.matmul(C('bool', [[True]]), C('bool', [[True]]))",
        "tf.matmul(C('int8', [[1]]), C('int8', [[1]]))",
        "tf.matmul(P('float32', np.zeros((0, 3))), P('float32', np.ones((3, 2))))",
        "tf.matmul(P('float32', np.ones((2, 0))), P('float32', np.ones((0, 2))))",
        f"tf.matmul(P('float32', {M23}), P('float32', {M32}), transpose_a=True, adjoint_a=True)",
        f"P('float32', {M23}) @ P('float32', {M32})",
    ]
    return cases


def _reductions() -> list[str]:
    cases = []
    m = "[[1.0, 4.0, 2.0], [3.0, 4.0, -1.0]]"
    for dtype in FLOATS:
        x = f"P('{dtype}', {m})"
        for fn in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"):
            cases += [
                f"tf.{fn}({x})",
                f"tf.{fn}({x}, axis=0)",
                f"tf.{fn}({x}, axis=[1], keepdims=True)",
                f"tf.{fn}({x}, axis=-1)",
            ]
    for fn in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"):
        cases += [
            f"tf.{fn}(U('float32', {m}), axis=1)",
            f"tf.{fn}(U('float32', {m}))",
            f"tf.{fn}(P('float32', np.zeros((0, 2))), axis=0)",
            f"tf.{fn}(P('float32', 2.5))",
            f"tf.{fn}(C('int32', [[1, 4, 2], [3, 4, -1]]), axis=1)",
            f"tf.{fn}(P('float32', {m}), axis=2)",
            f"tf.{fn}(P('float32', [[0.0, 2.0], [3.0, 0.0]]), axis=[0, 1])",
            f"tf.{fn}(P('float32', {m}), axis=[])",
        ]
    cases += [
        "tf.reduce_prod(P('float32', [[0.0, 2.0, 3.0], [0.0, 0.0, 1.0]]), axis=1)",
        "tf.reduce_max(C('bool', [True, False]))",
        "tf.reduce_max(C('uint8', [1, 200]))",
        "tf.reduce_mean([P('float32', [1.0, 2.0]), P('float32', [3.0, 5.0])], axis=0)",
        "tf.reduce_sum([P('float32', 1.0), 2.0, P('float32', 3.0)])",
        "tf.reduce_mean([[P('float32', 1.0), 2.0], [3.0, P('float32', 4.0)]], 1)",
    ]
    for fn in ("argmax", "argmin"):
        cases += [
            f"tf.{fn}(P('float32', {m}), axis=0)",
            f"tf.{fn}(P('float32', {m}), axis=1)",
            f"tf.{fn}(P('float32', {m}))",
            f"tf.{fn}(P('float32', {m}), 1, output_type=tf.int32)",
            f"tf.{fn}(C('int32', [3, 9, 9]), 0)",
            f"tf.{fn}(P('float32', {m}), axis=2)",
            f"tf.{fn}(U('float32', {m}), axis=1)",
            f"tf.{fn}(C('bool', [False, True]), 0)",
        ]
    return cases


def _arrays() -> list[str]:
    m = M23
    x = f"P('float32', {m})"
    u = f"U('float32', {m})"
    cube = "P('float32', np.arange(24.0).reshape(2, 3, 4))"
    return [
        f"tf.reshape({x}, [3, 2])",
        f"tf.reshape({x}, [-1])",
        f"tf.reshape({x}, [-1, 2])",
        f"tf.reshape({u}, [3, -1])",
        f"tf.reshape({x}, [4, 2])",
        f"tf.reshape({u}, [4, 2])",
        f"tf.reshape({x}, [-1, -1])",
        f"tf.reshape({x}, tf.shape(P('float32', np.zeros((3, 2)))))",
        "tf.reshape(P('float32', 3.0), [1, 1])",
        "tf.reshape(P('float32', np.zeros((0, 3))), [-1, 3])",
        "tf.reshape(C('int32', [1, 2, 3, 4]), [2, 2])",
        f"tf.transpose({x})",
        f"tf.transpose({cube}, [1, 2, 0])",
        f"tf.transpose({cube}, [2, 0, 1]) * 2.0",
        f"tf.transpose({u})",
        f"tf.transpose({x}, [0, 0])",
        f"tf.transpose({x}, [1, 0, 2])",
        f"tf.concat([{x}, {x} * 2.0], 0)",
        f"tf.concat([{x}, P('float32', [[1.0], [2.0]])], 1)",
        f"tf.concat([{x}, P('float32', [[1.0], [2.0]])], -1)",
        f"tf.concat([{u}, {x}], 1)",
        f"tf.concat([{x}], 0)",
        f"tf.concat([{x}, P('float32', [[1.0], [2.0]])], 0)",
        f"tf.concat([{x}, C('int32', [[1, 2, 3]])], 0)",
        f"tf.concat([{x}, [[7.0, 8.0, 9.0]]], 0)",
        "tf.concat([U('float32', [[1.0, 2.0]]), U('float32', [[3.0], [4.0]])], 1)",
        f"tf.stack([{x}, {x} + 1.0])",
        f"tf.stack([{x}, {x} + 1.0], axis=1)",
        f"tf.stack([{x}, {x} + 1.0], axis=-1)",
        "tf.stack([P('float32', 1.0), P('float32', 2.0), 3.0])",
        "tf.stack([[1, 2], [3, 4]])",
        f"tf.stack([{x}, P('float32', [1.0, 2.0])])",
        f"tf.unstack({x})[1]",
        f"tf.unstack({x}, axis=1)[2] * 3.0",
        f"tf.add_n(tf.unstack({cube}, axis=1))",
        f"tf.unstack({u})",
        f"tf.unstack({u}, num=2)[0]",
        f"tf.expand_dims({x}, 0)",
        f"tf.expand_dims({x}, -1)",
        f"tf.expand_dims({x}, 1)",
        f"tf.expand_dims({x}, 3)",
        f"tf.expand_dims({u}, 1)",
        "tf.squeeze(P('float32', [[[1.0], [2.0]]]))",
        "tf.squeeze(P('float32', [[[1.0], [2.0]]]), axis=[2])",
        "tf.squeeze(P('float32', [[[1.0], [2.0]]]), 0)",
        f"tf.squeeze({x}, axis=0)",
        "tf.squeeze(U('float32', [[[1.0], [2.0]]]))",
        f"tf.shape({x})",
        f"tf.shape({u})",
        f"tf.shape({x}, out_type=tf.int64)",
        f"tf.size({x})",
        f"tf.size({u})",
        f"tf.rank({x})",
        f"tf.rank({u})",
        f"tf.shape_n([{x}, {cube}])[1]",
        "tf.fill([2, 3], 1.5)",
        "tf.fill([2], P('float32', 1.5))",
        "tf.fill(tf.shape(U('float32', [[1.0, 2.0]])), 7)",
        "tf.fill([2], P('float32', [1.0]))",
        "tf.zeros_like(P('float32', [1.0, 2.0])) + P('float32', [1.0, 2.0])",
        "tf.ones_like(U('float32', [1.0, 2.0])) * U('float32', [3.0, 4.0])",
        "tf.one_hot(C('int32', [0, 2, -1, 3]), 3)",
        "tf.one_hot(C('int64', [[0, 2], [1, 1]]), 3, on_value=5.0, off_value=-1.0)",
        "tf.one_hot(C('int32', [0, 2]), 3, axis=0)",
        "tf.one_hot(C('int32', [0, 2]), 4, dtype=tf.int32)",
        "tf.one_hot(C('float32', [0.0]), 4)",
        "tf.one_hot(C('int32', [1]), 2, on_value=C('float64', 2.0), off_value=0.0)",
        "tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), [2, 0, 2])",
        "tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), C('int64', [[1], [1]]))",
        "tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), 1)",
        f"tf.gather({x}, [2, 0, 2], axis=1)",
        f"tf.gather({cube}, [[1, 0], [3, 3]], axis=2)",
        "tf.gather(U('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), U('int32', [2, 0]))",
        "tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), [3])",
        "tf.gather(V('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), [2, 0, 2])",
        "tf.gather(P('float32', [1.0, 2.0]), [0.5])",
        f"tf.tile({x}, [2, 1])",
        f"tf.tile({x}, [1, 3]) * 2.0",
        f"tf.tile({u}, [2, 2])",
        f"tf.tile({x}, [2])",
        "tf.tile(P('float32', [1.0, 2.0]), [0])",
        f"tf.slice({x}, [0, 1], [2, 2])",
        f"tf.slice({x}, [1, 0], [-1, 2])",
        f"tf.slice({u}, [0, 1], [1, -1])",
        f"tf.slice({x}, [1, 1], [2, 1])",
        f"tf.where(C('bool', [[True, False, True], [False, False, True]]), {x}, {x} * 10.0)",
        f"tf.where(C('bool', [True, False]), {x}, -{x})",
        "tf.where(C('bool', [[True, False, True], [False, False, True]]))",
        f"tf.where_v2(C('bool', [True, False, True]), {x}, P('float32', 0.0))",
        f"tf.where_v2(P('float32', [1.0, -1.0, 2.0]) > 0.0, {x}, P('float32', [[9.0], [8.0]]))",
        f"tf.where({x} > 0.0, {x}, P('float32', [1.0, 2.0, 3.0]))",
        "tf.where_v2(C('bool', [True, False]), P('float32', [1.0, 2.0, 3.0]), 0.0)",
        "tf.where_v2(U('bool', [True, False]), P('float32', [[1.0], [2.0]]), 0.0)",
        f"tf.stop_gradient({x}) * {x}",
        f"tf.identity({x}) * 2.0",
        "tf.broadcast_to(P('float32', [1.0, 2.0, 3.0]), [2, 3])",
        "tf.broadcast_to(P('float32', [[1.0], [2.0]]), [2, 2])",
        "tf.range(5)",
        "tf.range(1, 10, 3)",
        "tf.range(0.0, 1.0, 0.25)",
        "tf.range(5, 0, -2)",
        "tf.invert_permutation([2, 0, 1])",
        "tf.unsorted_segment_sum(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), [1, 0, 1], 3)",
        f"tf.split({x}, 3, axis=1)[2] * 2.0",
        f"tf.add_n(tf.split({x}, [1, 2], 1)[1:]) * 1.0",
        f"tf.split({x}, [2, -1], axis=1)[1]",
        f"tf.split({x}, 2)[0] - tf.split({x}, 2)[1]",
        f"tf.split({x}, 2, axis=1)",
        f"tf.split({x}, [1, 1], axis=1)",
        f"tf.split({u}, 3, axis=1)[0]",
        f"tf.split({u}, [1, 2], axis=1)[1]",
        f"tf.pad({x}, [[1, 0], [0, 2]])",
        f"tf.pad({x}, [[1, 1], [2, 0]], constant_values=-1.0)",
        f"tf.pad({x}, [[1, 1], [2, 1]], mode='REFLECT') * 2.0",
        f"tf.pad({x}, [[1, 1], [2, 1]], mode='SYMMETRIC')",
        f"tf.pad({x}, [[1, 1], [3, 0]], mode='REFLECT')",
        f"tf.pad({u}, [[1, 0], [0, 2]])",
        f"tf.pad({x}, [[1, 0]])",
        f"tf.pad({x}, [[1, 0], [0, 1]], mode='wrap')",
        f"tf.reverse({x}, [1])",
        f"tf.reverse({cube}, [0, 2]) * 2.0",
        f"tf.reverse({x}, [2])",
        f"tf.cumsum({x}, 1)",
        f"tf.cumsum({x}, axis=0, exclusive=True)",
        f"tf.cumsum({x}, axis=1, reverse=True) * {x}",
        f"tf.cumsum({cube}, axis=-1, exclusive=True, reverse=True)",
        "tf.cumsum(C('int32', [1, 2, 3]))",
        f"tf.boolean_mask({x}, [True, False])",
        f"tf.boolean_mask({x}, [[True, False, True], [False, False, True]])",
        f"tf.boolean_mask({cube}, [[True, False, True], [False, False, True]], axis=1)",
        f"tf.boolean_mask({x}, C('bool', [False, True, True]), axis=1) * 3.0",
        f"tf.boolean_mask({x}, True)",
        "tf.sequence_mask([1, 3, 0], 4)",
        "tf.sequence_mask(C('int32', [1, 3, 2]))",
        "tf.sequence_mask([1, 2], 3, dtype=tf.float32) * P('float32', [[1.0, 2.0, 3.0]])",
        "tf.floor(P('float32', [1.5, -1.5, 2.0]))",
        "tf.ceil(P('float32', [1.5, -1.5, 2.0]))",
        "tf.round(P('float32', [0.5, 1.5, -2.5, 0.4]))",
        "tf.round(C('int32', [1, 2]))",
        "tf.floor(C('int32', [1, 2]))",
        "tf.reduce_any(C('bool', [[True, False], [False, False]]), axis=1)",
        "tf.reduce_all(C('bool', [[True, False], [True, True]]), axis=1, keepdims=True)",
        "tf.reduce_all(C('bool', np.zeros((0,), bool)))",
        "tf.reduce_any(P('float32', [1.0]))",
        "tf.to_float(C('int32', [1, 2])) * P('float32', [1.5, 2.0])",
        "tf.to_int32(P('float32', [1.5, -2.5]))",
        "tf.to_int64(P('float32', [1.5, -2.5]))",
        "tf.to_double(P('float32', [1.5, -2.5])) * 2.0",
        "tf.convert_to_tensor([P('float32', 1.0), 2.0, P('float32', 3.0)])",
        f"tf.linalg.transpose({x})",
        f"tf.linalg.transpose({cube}) * 2.0",
        "tf.linalg.transpose(U('float32', np.arange(24.0).reshape(2, 3, 4)))",
        "tf.linalg.transpose(P('float32', [1.0, 2.0]))",
        f"tf.linalg.matmul({x}, {x}, transpose_b=True)",
        "tf.math.log(P('float32', [1.0, 2.0])) + tf.math.reduce_sum(P('float32', [3.0]))",
        f"tf.identity([{x}, {x}])",
        # empty and 0-d tensors
        f"tf.concat([P('float32', np.zeros((0, 3))), {x}], 0)",
        "tf.expand_dims(P('float32', 2.0), 0)",
        "tf.reshape(P('float32', np.zeros((2, 0))), [0, 5])",
        "tf.transpose(P('float32', np.zeros((2, 0, 1))), [2, 0, 1])",
        "tf.tile(P('float32', 2.0), [])",
        "tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0]]), np.zeros((0,), np.int32))",
        "tf.stack([P('float32', np.zeros((0,))), P('float32', np.zeros((0,)))])",
        "tf.slice(P('float32', [1.0, 2.0]), [1], [0])",
        # other dtypes
        "tf.transpose(C('int64', [[1, 2], [3, 4]]))",
        "tf.gather(C('int64', [[1, 2], [3, 4]]), [1])",
        "tf.gather(C('string', [b'a', b'b']), [1, 1])",
        "tf.reshape(C('bool', [True, False]), [2, 1])",
        "tf.concat([C('uint8', [1]), C('uint8', [2])], 0)",
        "tf.tile(C('int8', [1, 2]), [2])",
        "tf.where(C('bool', [True, False]), C('int32', [1, 2]), C('int32', [3, 4]))",
        "tf.stack([C('int16', [1]), C('int16', [2])], 1)",
        "tf.squeeze(C('string', [[b'a']]))",
        "tf.expand_dims(C('bool', True), 0)",
    ]


def _indexing() -> list[str]:
    x = f"P('float32', {M23})"
    cube = "P('float32', np.arange(24.0).reshape(2, 3, 4))"
    u = "U('float32', np.arange(24.0).reshape(2, 3, 4))"
    return [
        f"{x}[0]",
        f"{x}[1]",
        f"{x}[-1]",
        f"{x}[:, 1:3]",
        f"{x}[:, ::-1]",
        f"{x}[::-1, ::2]",
        f"{x}[1, 2]",
        f"{x}[..., 1]",
        f"{x}[:, None, 1:]",
        f"{x}[None]",
        f"{x}[5:]",
        f"{x}[2]",
        f"{x}[:, -5:10]",
        f"{cube}[1, ..., 1:3]",
        f"{cube}[:, 1]",
        f"{cube}[..., ::-2]",
        f"{cube}[0, :, tf.newaxis, 2]",
        f"{u}[1, ..., 1:3]",
        f"{u}[:, 1]",
        f"{x}[C('int32', 1)]",
        f"{x}[:, C('int32', 1):]",
        f"{x}[1.5]",
        f"{x}[0, 0, 0]",
        f"tf.strided_slice({x}, [0, 0], [2, 3], [1, 2])",
        f"tf.strided_slice({x}, [1], [2], shrink_axis_mask=1)",
        f"V('float32', {M23})[1, 1:]",
        "P('float32', 5.0)[None]",
    ]


def _gradients() -> list[str]:
    x = f"P('float32', {M23})"
    w = f"V('float32', {M32})"
    return [
        # several ys, several xs, grad_ys, unconnected, stop_gradients
        "G([tf.reduce_sum(P('float32', [1.0, 2.0]) * 3.0), tf.reduce_sum(P('float32', [4.0]))],"
        " 'inputs')",
        "G(P('float32', [1.0, 2.0]) * 3.0, 'inputs', grad_ys=C('float32', [10.0, -1.0]))",
        "G(P('float32', [1.0, 2.0]) * 3.0, 'inputs', grad_ys=[[10.0, -1.0]])",
        "G(P('float32', [1.0, 2.0]) * 3.0, 'inputs', grad_ys=C('float64', [1.0, 1.0]))",
        "G(P('float32', [1.0, 2.0]) * 3.0, 'inputs', grad_ys=[C('float32', [1.0, 1.0])] * 2)",
        "G(P('float32', [1.0, 2.0]) * 3.0, ['inputs', P('float32', [5.0])])",
        "G(P('float32', [1.0, 2.0]) * 3.0, ['inputs', P('float32', [5.0])], "
        "unconnected_gradients='zero')",
        "G(P('float32', [1.0, 2.0]) * 3.0, ['inputs', U('float32', [5.0])], "
        "unconnected_gradients=tf.UnconnectedGradients.ZERO)",
        "G(P('float32', [1.0, 2.0]) * 3.0, 'inputs', unconnected_gradients='sometimes')",
        "G(P('float32', [1.0, 2.0]) * 3.0, 'inputs', aggregation_method=7)",
        "G(P('float32', [1.0, 2.0]) * 3.0, 'inputs', "
        "aggregation_method=tf.AggregationMethod.EXPERIMENTAL_TREE)",
        "G(P('float32', [1.0, 2.0]), 'inputs')",
        "G(C('int32', [1, 2]) * 2, 'inputs')",
        "G(tf.cast(C('int32', [1, 2]), tf.float32) * 2.0, 'inputs')",
        "G(tf.cast(P('float32', [1.5, 2.5]), tf.int32), 'inputs')",
        "G(tf.cast(tf.cast(P('float32', [1.5, 2.5]), tf.int32), tf.float32), 'inputs')",
        "G(C('complex64', [1.0]) * 2.0, 'inputs')",
        "G(C('string', [b'a']), 'inputs')",
        # several paths: dense, sparse, mixed
        f"G(tf.reduce_sum({x} * {x}) + tf.reduce_sum(tf.exp({x})), 'inputs')",
        "G(tf.reduce_sum(tf.gather(V('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), [2, 0]))"
        " + tf.reduce_sum(tf.gather(V('float32', [[1.0, 2.0]]), [0, 0])), 'inputs')",
        "G(tf.reduce_sum(tf.gather(C('float32', [[1.0, 2.0], [3.0, 4.0]]), [1]) * "
        "P('float32', [[2.0, 3.0]])), 'inputs')",
        "G(tf.reduce_sum(tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), "
        "[2, 0]) * 2.0), 'inputs')",
        "G(tf.reduce_sum(tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), "
        "[2, 0]) ** 2) + tf.reduce_sum(tf.gather(P('float32', [[1.0, 2.0]]), [0, 0, 0])), "
        "'inputs')",
        "G([tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), [1]), "
        "tf.gather(P('float32', [[7.0, 8.0]]), C('int64', [0]))], 'inputs')",
        "G(tf.reduce_sum(tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0]]), [1])) + "
        "tf.reduce_sum(P('float32', [[1.0, 2.0], [3.0, 4.0]])), 'inputs')",
        "G(tf.gather(U('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), U('int32', [[2, 0]])),"
        " 'inputs')",
        # stop_gradient, stop_gradients, identity, variables
        f"G(tf.reduce_sum(tf.stop_gradient({x}) * {x}), 'inputs')",
        "G(P('float32', [2.0]) * P('float32', [3.0]), 'inputs', stop_gradients='inputs')",
        "G(tf.square(tf.identity(P('float32', [2.0]))) * 3.0, 'inputs', stop_gradients=['inputs'])",
        f"G(tf.reduce_sum(tf.matmul({x}, {w})), 'inputs')",
        f"G(tf.reduce_mean(tf.matmul({x}, {w}) ** 2), 'inputs')",
        "G(tf.reduce_sum(V('float32', [1.0, 2.0]).read_value() * 2.0), 'inputs')",
        "G(tf.reduce_sum(P('float64', [[1.0, 2.0], [3.0, 4.0]]) ** 3), 'inputs')",
        # an MLP and a softmax written with math ops
        "G(tf.reduce_mean(tf.square(tf.matmul(tf.maximum(tf.matmul(P('float32', "
        "[[1.0, -2.0], [0.5, 1.5]]), V('float32', [[0.3, -0.2, 0.1], [0.4, 0.5, -0.6]])) + "
        "V('float32', [0.1, -0.1, 0.2]), 0.0), V('float32', [[1.0], [-1.0], [0.5]])) - 1.0)), "
        "'inputs')",
        "G(-tf.reduce_sum(P('float32', [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]) * tf.log("
        "tf.exp(P('float32', [[1.0, 2.0, 0.5], [-1.0, 0.0, 1.0]])) / tf.reduce_sum(tf.exp("
        "P('float32', [[1.0, 2.0, 0.5], [-1.0, 0.0, 1.0]])), axis=1, keepdims=True))), "
        "'inputs')",
        "G(tf.reduce_sum(tf.tile(U('float32', [[1.0, 2.0]]), U('int32', [2, 3]))), 'inputs')",
        "G(tf.reduce_sum(tf.reshape(U('float32', [[1.0, 2.0]]), [-1]) * "
        "U('float32', [[3.0], [4.0]])), 'inputs')",
        "G(tf.reduce_sum(tf.transpose(U('float32', [[1.0, 2.0]])) * P('float32', [[3.0], "
        "[4.0]])), 'inputs')",
        "G(tf.reduce_max(U('float32', [[1.0, 5.0], [5.0, 2.0]]), axis=U('int32', [1])), 'inputs')",
        "G(tf.reduce_mean(U('float32', [[1.0, 5.0], [5.0, 2.0]]), axis=U('int32', 0)), 'inputs')",
        "G(tf.reduce_mean(U('float32', [[1.0, 5.0], [5.0, 2.0]])), 'inputs')",
        # empty and 0-d tensors
        "G(tf.reduce_sum(tf.matmul(P('float32', np.zeros((0, 3))), P('float32', "
        "np.ones((3, 2))))), 'inputs')",
        "G(tf.reduce_mean(P('float32', np.zeros((0, 2)))), 'inputs')",
        "G(tf.reduce_max(P('float32', np.zeros((0, 2))), axis=0), 'inputs')",
        "G(P('float32', 3.0) * P('float32', [1.0, 2.0]), 'inputs')",
        "G(tf.reduce_sum(P('float16', [[1.0, 2.0]]) * P('float16', [[3.0], [4.0]])), 'inputs')",
        "G(tf.reduce_sum(tf.matmul(P('float16', [[1.0, 2.0]]), P('float16', [[3.0], [4.0]]))),"
        " 'inputs')",
        "G(tf.reduce_sum(tf.matmul(P('float64', np.ones((2, 2, 3))), P('float64', "
        "np.ones((3, 4))))), 'inputs')",
        "G(tf.reduce_sum(tf.matmul(U('float32', np.ones((2, 2, 3))), U('float32', "
        "np.ones((1, 3, 4))))), 'inputs')",
        "G(tf.reduce_sum(tf.gather(tf.gather(P('float32', [[1.0, 2.0], [3.0, 4.0], [5.0, "
        "6.0]]), [2, 1]), [1, 1, 0])), 'inputs')",
        "G(tf.reduce_sum(tf.gather(V('float32', [[1.0, 2.0], [3.0, 4.0]]), [1]) * 2.0), "
        "['inputs', V('float32', [7.0])], unconnected_gradients='zero')",
        "G([P('float32', [1.0, 2.0]) * 2.0, P('float32', [3.0]) * 3.0], 'inputs', "
        "grad_ys=[None, C('float32', [5.0])])",
        "G(tf.reduce_sum(tf.where_v2(P('float32', [[1.0], [-1.0]]) > 0.0, P('float32', [1.0, "
        "2.0, 3.0]), P('float32', 5.0))), 'inputs')",
        "G(tf.reduce_sum(tf.one_hot(C('int32', [1, 0]), 3) * P('float32', [1.0, 2.0, 3.0])), "
        "'inputs')",
        "G(tf.reduce_sum(tf.gather(P('float32', [1.0, 2.0, 3.0]), P('int32', [2, 2]))), "
        "[P('int32', [0])])",
        "G(tf.reduce_sum(tf.maximum(tf.matmul(P('float32', [[1.0, 2.0]]), P('float32', [[1.0, "
        "-1.0], [2.0, 0.5]])), 0.0) ** 2), 'inputs')",
        "G(tf.reduce_sum(tf.stack([P('float32', [1.0, 2.0]), P('float32', [3.0, 4.0])]) * "
        "C('float32', [[1.0], [2.0]])), 'inputs')",
        "G(tf.reduce_sum(tf.concat([P('float32', [[1.0]]), U('float32', [[2.0, 3.0]])], 1) ** "
        "2), 'inputs')",
        "G(tf.reduce_sum(P('float32', [[1.0, 2.0], [3.0, 4.0]])[:, ::-1] * C('float32', "
        "[[1.0, 2.0]])), 'inputs')",
        "G(tf.reduce_sum(U('float32', [[1.0, 2.0], [3.0, 4.0]])[1:, None, 1] * 3.0), 'inputs')",
        "G(tf.reduce_sum(tf.squeeze(tf.expand_dims(P('float32', [1.0, 2.0]), 0)) ** 3), 'inputs')",
        "G(tf.reduce_sum(tf.gather(P('float32', np.arange(12.0).reshape(2, 3, 2), "
        "shape=[None, 3, None]), [[2, 2], [0, 1]], axis=1) ** 2), 'inputs')",
        "G(tf.reduce_sum(tf.gather(P('float32', np.arange(12.0).reshape(2, 3, 2), "
        "shape=[2, None, 2]), [2, 2, 0], axis=1) * 3.0), 'inputs')",
        "G(tf.reduce_sum(tf.matmul(P('bfloat16', [[1.0, 2.0]]), P('bfloat16', [[3.0], [4.0]])) "
        "* P('bfloat16', [[0.5]])), 'inputs')",
        "G(tf.reduce_mean(tf.exp(P('bfloat16', [1.0, 2.0])) + tf.sqrt(P('bfloat16', [4.0, "
        "9.0]))), 'inputs')",
        # a complex y needs its grad_ys
        "G(tf.reduce_sum(C('complex64', [1.0]) * 2.0), 'inputs')",
    ]


def _in_every_float(cases: list[str]) -> list[str]:
    """The cases, and each again with its float32 values in float64 and float16."""
    found = list(cases)
    for dtype in ("float64", "float16"):
        found += [c.replace("'float32'", f"'{dtype}'") for c in cases if "'float32'" in c]
    return list(dict.fromkeys(found))


CASES = (
    _elementwise()
    + _matmul()
    + _reductions()
    + _in_every_float(_arrays() + _indexing())
    + _gradients()
)

EAGER_CASES = [
    "tf.matmul(np.array([[1.0, 2.0]], np.float32), np.array([[3.0], [4.0]], np.float32))",
    "tf.matmul([[1, 2]], [[3], [4]])",
    "tf.sqrt(np.array([4.0, 2.0]))",
    "tf.exp(1.0)",
    "tf.log([1.0, 0.0])",
    "tf.maximum([1, 5], 3)",
    "tf.minimum(np.array([1.5], np.float16), 0.5)",
    "tf.pow(2.0, [1.0, 0.5])",
    "tf.equal([1, 2], 2)",
    "tf.less([1.0, 2.0], 1.5)",
    "tf.logical_not([True, False])",
    "tf.add_n([np.ones(2, np.float32), np.ones(2, np.float32)])",
    "tf.reduce_max(np.array([[1, 5], [7, 2]], np.int32), axis=1)",
    "tf.reduce_min([[1.0, 5.0], [7.0, 2.0]])",
    "tf.reduce_prod([[1.0, 5.0], [7.0, 2.0]], 0, keepdims=True)",
    "tf.reduce_mean([np.ones(2, np.float32), np.zeros(2, np.float32)], axis=0)",
    "tf.argmax([[1.0, 5.0], [7.0, 2.0]], 1)",
    "tf.argmin([[1.0, 5.0], [7.0, 2.0]])",
    "tf.reshape(np.arange(6), [3, -1])",
    "tf.reshape(np.arange(6), [4, -1])",
    "tf.transpose(np.arange(6).reshape(2, 3))",
    "tf.concat([[1, 2], [3]], 0)",
    "tf.stack([[1, 2], [3, 4]], axis=1)",
    "tf.unstack(np.arange(6).reshape(2, 3))[1]",
    "tf.expand_dims([1, 2], 0)",
    "tf.squeeze(np.zeros((1, 2, 1)))",
    "tf.shape(np.zeros((2, 0, 3)))",
    "tf.size(np.zeros((2, 3)))",
    "tf.rank(np.zeros((2, 3)))",
    "tf.fill([2, 2], 3)",
    "tf.one_hot([0, 2], 3)",
    "tf.gather([[1, 2], [3, 4]], [1, 1])",
    "tf.gather([1, 2], [5])",
    "tf.tile([[1, 2]], [2, 2])",
    "tf.slice(np.arange(6).reshape(2, 3), [0, 1], [2, 2])",
    "tf.where([True, False], [1, 2], [3, 4])",
    "tf.where([[True, False], [False, True]])",
    "tf.stop_gradient([1.0])",
    "tf.cast([1.5, -1.5], tf.int32)",
    "tf.strided_slice(np.arange(6).reshape(2, 3), [0, 0], [2, 3], [1, 2])",
    "tf.range(3)",
    "tf.split(np.arange(6), 3)[1]",
    "tf.split(np.arange(6), [1, -1])[1]",
    "tf.reduce_any([False, True])",
    "tf.round([0.5, 1.5])",
    # errors found at once
    "tf.split(np.arange(6), 4)",
    "tf.split(np.arange(6), [1, 2])",
    "tf.expand_dims(np.ones((2, 3)), 3)",
    "tf.reshape(np.arange(6), [4, 2])",
    "tf.strided_slice(np.ones((2, 3)), [0, 0, 0], [1, 1, 1], [1, 1, 1], shrink_axis_mask=7)",
    "tf.strided_slice(np.ones((2, 3)), [5], [6], [1], shrink_axis_mask=1)",
    "tf.concat([np.ones((2, 3)), np.ones((2, 1))], 0)",
    "tf.concat([np.ones((2, 3)), np.ones((2, 1))], 2)",
    "tf.stack([np.ones(2), np.ones(3)])",
    "tf.squeeze(np.ones((2, 3)), 0)",
    "tf.tile(np.ones((2, 3)), [2])",
    "tf.transpose(np.ones((2, 3)), [1, 0, 2])",
    "tf.matmul(np.ones((2, 3)), np.ones((2, 3)))",
    "tf.matmul(np.ones(3), np.ones((3, 2)))",
    "tf.gather(np.ones((2, 3)), [5])",
    "tf.fill([2], np.ones(2))",
    "tf.argmax(np.ones((2, 3)), 2)",
    "tf.add_n([np.ones(2), np.ones(3)])",
    "tf.where([True], [1, 2], [3, 4])",
    "tf.one_hot([1], -1)",
    "tf.slice(np.ones((2, 3)), [1, 1], [2, 1])",
    "tf.reduce_max(np.ones((2, 3)), 2)",
    "tf.unstack(np.ones((2, 3)), axis=3)",
    "tf.sqrt(np.array([4], np.int32))",
    "tf.maximum(np.ones(2), np.ones(3))",
    "tf.equal(np.ones(2), np.ones(3))",
    "tf.one_hot([1.0], 2)",
]


def _mlp_program(tf: Any) -> list[float]:
    """Five gradient-descent steps of a 4-8-3 network with a softmax cross entropy,
    written with the math ops and ``tf.gradients``: the losses."""
    rng = np.random.default_rng(3)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 4])
        labels = tf.placeholder(tf.int32, [None])
        w1 = tf.Variable(rng.normal(0, 0.5, (4, 8)).astype(np.float32))
        b1 = tf.Variable(np.zeros(8, np.float32))
        w2 = tf.Variable(rng.normal(0, 0.5, (8, 3)).astype(np.float32))
        b2 = tf.Variable(np.zeros(3, np.float32))
        hidden = tf.maximum(tf.matmul(x, w1) + b1, 0.0)
        logits = tf.matmul(hidden, w2) + b2
        shifted = logits - tf.reduce_max(logits, axis=1, keepdims=True)
        log_probs = shifted - tf.log(tf.reduce_sum(tf.exp(shifted), axis=1, keepdims=True))
        loss = -tf.reduce_mean(tf.reduce_sum(tf.one_hot(labels, 3) * log_probs, axis=1))
        weights = [w1, b1, w2, b2]
        grads = tf.gradients(loss, weights)
        step = tf.group(*[w.assign_sub(0.5 * g) for w, g in zip(weights, grads, strict=True)])
        feed = {x: rng.normal(size=(16, 4)).astype(np.float32), labels: rng.integers(0, 3, 16)}
        losses = []
        with tf.Session(graph=graph) as session:
            session.run(tf.global_variables_initializer())
            for _ in range(5):
                losses.append(float(session.run(loss, feed)))
                session.run(step, feed)
    return losses


def _embedding_program(tf: Any) -> list[float]:
    """Five steps of a regression on embedding rows gathered from a variable, its
    sparse gradient applied with ``scatter_sub``: the losses."""
    rng = np.random.default_rng(5)
    graph = tf.Graph()
    with graph.as_default():
        ids = tf.placeholder(tf.int32, [None])
        target = tf.placeholder(tf.float32, [None])
        table = tf.Variable(rng.normal(0, 1.0, (10, 4)).astype(np.float32))
        w = tf.Variable(rng.normal(0, 1.0, (4, 1)).astype(np.float32))
        rows = tf.gather(table, ids)
        guess = tf.squeeze(tf.matmul(rows, w), axis=1)
        loss = tf.reduce_mean(tf.square(guess - target))
        g_table, g_w = tf.gradients(loss, [table, w])
        step = tf.group(
            tf.scatter_sub(table, g_table.indices, 0.1 * g_table.values),
            w.assign_sub(0.1 * g_w),
        )
        feed = {ids: rng.integers(0, 10, 12), target: rng.normal(size=12).astype(np.float32)}
        losses = []
        with tf.Session(graph=graph) as session:
            session.run(tf.global_variables_initializer())
            for _ in range(5):
                losses.append(float(session.run(loss, feed)))
                session.run(step, feed)
    return losses


PROGRAMS = {"mlp": _mlp_program, "embedding": _embedding_program}


def outcome(tf: Any, expression: str) -> dict[str, Any]:
    """What building and running ``expression`` gives, with the gradients."""
    graph = tf.Graph()
    with graph.as_default():
        inputs: list[Any] = []
        feeds: dict[Any, Any] = {}
        variables: list[Any] = []

        def array_of(dtype: str, values: Any) -> Any:
            kind = object if dtype == "string" else tf.as_dtype(dtype).as_numpy_dtype
            return np.array(values, dtype=kind)

        def make_constant(dtype: str, values: Any) -> Any:
            made = tf.constant(array_of(dtype, values))
            inputs.append(made)
            return made

        def make_placeholder(dtype: str, values: Any, known: bool = True, shape: Any = None) -> Any:
            array = array_of(dtype, values)
            static = shape if shape is not None else array.shape if known else None
            made = tf.placeholder(tf.as_dtype(dtype), shape=static)
            feeds[made] = array
            inputs.append(made)
            return made

        def make_variable(dtype: str, values: Any) -> Any:
            made = tf.Variable(array_of(dtype, values))
            variables.append(made)
            inputs.append(made)
            return made

        def unknown(dtype: str, values: Any) -> Any:
            return make_placeholder(dtype, values, known=False)

        def gradients_of(ys: Any, xs: Any, **arguments: Any) -> Any:
            return _GradientsCall(ys, xs, arguments)

        names = {
            "tf": tf,
            "np": np,
            "C": make_constant,
            "P": make_placeholder,
            "U": unknown,
            "V": make_variable,
            "G": gradients_of,
        }
        try:
            result = eval(expression, names)  # the case is the expression, as written
            if isinstance(result, _GradientsCall):
                return _gradients_outcome(tf, graph, result, inputs, feeds, variables)
        except Exception as error:  # every build-time error is part of the outcome
            return {"error": type(error).__name__, "message": message_of(error)}
        if isinstance(result, (list, tuple)):
            return {"list": len(result)}
        found: dict[str, Any] = {
            "op": result.op.type,
            "dtype": result.dtype.name,
            "shape": None if result.shape.rank is None else list(result.shape.as_list()),
        }
        float_inputs = [x for x in inputs if x.dtype.name in FLOATS]
        with tf.Session(graph=graph) as session:
            session.run([v.initializer for v in variables])
            try:
                found["value"] = _plain(session.run(result, feeds))
            except tf.errors.OpError as error:
                found["run_error"] = type(error).__name__
                return found
            if result.dtype.name in FLOATS and float_inputs:
                try:
                    grads = tf.gradients(result, float_inputs)
                except Exception as error:
                    found["grad_error"] = type(error).__name__
                    return found
                found["grads"] = _run_gradients(tf, session, grads, feeds)
    return found


class _GradientsCall:
    def __init__(self, ys: Any, xs: Any, arguments: dict[str, Any]) -> None:
        self.ys, self.xs, self.arguments = ys, xs, arguments


def _gradients_outcome(
    tf: Any,
    graph: Any,
    call: _GradientsCall,
    inputs: list[Any],
    feeds: dict[Any, Any],
    variables: list[Any],
) -> dict[str, Any]:
    def expand(value: Any) -> Any:
        if isinstance(value, str) and value == "inputs":
            return [x for x in inputs if x.dtype.name in FLOATS]
        if isinstance(value, list):
            found: list[Any] = []
            for item in value:
                found.extend(expand(item) if isinstance(item, str) else [item])
            return found
        return value

    arguments = {
        key: expand(value) if key == "stop_gradients" else value
        for key, value in call.arguments.items()
    }
    try:
        grads = tf.gradients(call.ys, expand(call.xs), **arguments)
    except Exception as error:
        return {"grad_error": type(error).__name__}
    with tf.Session(graph=graph) as session:
        session.run([v.initializer for v in variables])
        try:
            return {"grads": _run_gradients(tf, session, grads, feeds)}
        except tf.errors.OpError as error:
            return {"run_error": type(error).__name__}


def _run_gradients(tf: Any, session: Any, grads: list[Any], feeds: dict[Any, Any]) -> list[Any]:
    found: list[Any] = []
    for grad in grads:
        if grad is None:
            found.append(None)
        elif hasattr(grad, "indices"):
            values, indices, dense_shape = session.run(
                [grad.values, grad.indices, grad.dense_shape], feeds
            )
            found.append(
                {
                    "indices": _plain(indices),
                    "values": _plain(values),
                    "values_shape": list(np.shape(values)),
                    "dense_shape": _plain(dense_shape),
                    "dtype": grad.values.dtype.name,
                }
            )
        else:
            value = session.run(grad, feeds)
            found.append(
                {
                    "dtype": grad.dtype.name,
                    "shape": None if grad.shape.rank is None else list(grad.shape.as_list()),
                    "value": _plain(value),
                    "value_shape": list(np.shape(value)),
                }
            )
    return found


def eager_outcome(tf: Any, expression: str) -> dict[str, Any]:
    """What ``expression`` gives at once, in eager mode."""
    try:
        result = eval(expression, {"tf": tf, "np": np})
        array = np.asarray(result)
    except Exception as error:
        return {"error": type(error).__name__, "message": message_of(error)}
    return {"dtype": array.dtype.name, "shape": list(array.shape), "value": _plain(array)}


def message_of(error: BaseException) -> str:
    """The part of an error's message both implementations word alike: its first
    line, without the node text TensorFlow's graph builder appends (`` for
    '{{node ...}}' with input shapes ...``) or its eager op suffix."""
    text = str(getattr(error, "message", None) or error)
    text = re.sub(r"^\{\{function_node [^}]*\}\} ", "", text).split("\n")[0]
    return text.split(" for '{{node ")[0].split(" [Op:")[0].strip()


def outcomes(tf: Any) -> dict[str, dict[str, Any]]:
    """Every case's outcome: the graph table, and the eager one."""
    graph = {case: outcome(tf, case) for case in CASES}
    return {
        "graph": graph,
        "eager": {case: eager_outcome(tf, case) for case in EAGER_CASES},
        "programs": {name: program(tf) for name, program in PROGRAMS.items()},
    }


def _plain(value: Any) -> Any:
    """A fetched value as JSON: a flat list of numbers (NaN, infinities as strings)."""
    array = np.asarray(value)
    if array.dtype.kind in "OSU":
        return [v.decode() if isinstance(v, bytes) else v for v in array.reshape(-1).tolist()]
    if array.dtype.kind == "c":
        return [[_number(z.real), _number(z.imag)] for z in array.reshape(-1).tolist()]
    wide = np.float64 if array.dtype.kind == "f" or array.dtype.name == "bfloat16" else array.dtype
    return [_number(v) for v in array.astype(wide).reshape(-1).tolist()]


def _number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


# --- comparing outcomes ----------------------------------------------------------

TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 2e-6, "float64": 1e-12}


def close(expected: Any, found: Any, dtype: str | None) -> bool:
    """Two flat value lists equal within the dtype's rounding (exact for non-floats)."""
    if not isinstance(expected, list) or not isinstance(found, list):
        return bool(expected == found)
    if len(expected) != len(found):
        return False
    if dtype not in TOLERANCE:
        return expected == found
    left = np.array([float(v) for v in expected])
    right = np.array([float(v) for v in found])
    scale = TOLERANCE[dtype]
    return bool(np.allclose(left, right, rtol=scale * 4, atol=scale * 4, equal_nan=True))


def same_outcome(expected: dict[str, Any], found: dict[str, Any]) -> bool:
    """Whether tf_accum's outcome of a case is TensorFlow's (values within rounding)."""
    if set(expected) != set(found):
        return False
    for key, want in expected.items():
        have = found[key]
        if key == "value":
            if not close(want, have, expected.get("dtype")):
                return False
        elif key == "grads":
            if len(want) != len(have):
                return False
            for one, other in zip(want, have, strict=True):
                if not _same_gradient(one, other):
                    return False
        elif want != have:
            return False
    return True


def _same_gradient(want: Any, have: Any) -> bool:
    if want is None or have is None:
        return want is have
    if set(want) != set(have):
        return False
    for key, value in want.items():
        if key in ("value", "values"):
            if not close(value, have[key], want.get("dtype")):
                return False
        elif value != have[key]:
            return False
    return True


def tensorflow_outcomes() -> dict[str, dict[str, Any]]:
    """Every case's outcome on TensorFlow (eager by default, so the graph cases
    build in their own Graphs)."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tensorflow

    return outcomes(tensorflow.compat.v1)


def main() -> int:
    found = tensorflow_outcomes()
    if "--record" in sys.argv:
        RECORD.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(found['graph'])} + {len(found['eager'])} cases", file=sys.stderr)
        return 0
    recorded = json.loads(RECORD.read_text())
    differ = [
        f"{table}: {case}"
        for table in ("graph", "eager")
        for case, outcome_ in found[table].items()
        if not same_outcome(recorded[table].get(case, {}), outcome_)
    ]
    differ += [
        f"program: {name}"
        for name, losses in found["programs"].items()
        if not np.allclose(losses, recorded["programs"].get(name, []), rtol=1e-5)
    ]
    for line in differ:
        print(f"TensorFlow today differs from the record: {line}", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
