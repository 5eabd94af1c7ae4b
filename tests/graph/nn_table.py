"""The table of model-math cases (``tf.nn``, ``tf.losses``, clip ops, random
ops, initializers, ``get_variable``), and how one case's outcome is found.

A case is an expression over ``tf`` (``tf_accum.compat.v1`` or
``tensorflow.compat.v1``), ``np`` and its inputs ``x0``, ``x1``, ...
(constants made from deterministic arrays). It is built in a fresh Graph
(with ``tf.set_random_seed(SEED)`` first when the case says so) and run in
a Session; its outcome is the build-time error class, or the result's dtype,
static shape and value (or the run-time error class), and, for the inputs the
case names, the gradient of ``sum(result * upstream)`` with respect to them.

TensorFlow's gradients come from ``tf.gradients``; tf_accum's, until it has
``tf.gradients``, from the gradient function registered for the result's op
type, called directly (so a case names only inputs of that op itself).
``python -m tests.graph.nn_table --record`` writes TensorFlow's outcomes
to ``nn_tensorflow.json``; ``--check`` compares TensorFlow's outcomes
today with that record and exits 1 if they differ.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

RECORD = Path(__file__).with_name("nn_tensorflow.json")
SEED = 1234
FLOATS = ("float16", "float32", "float64")


@dataclass(frozen=True)
class Case:
    """``expression`` over inputs made by ``inputs`` (``(dtype, shape, kind)``)."""

    group: str
    expression: str
    inputs: tuple[tuple[str, tuple[int, ...], str], ...] = ()
    gradients: tuple[int, ...] = ()
    seeded: bool = False
    runs: int = 1
    exact: bool = False
    upstream: str = field(default="normal")


def _array(index: int, dtype: str, shape: tuple[int, ...], kind: str) -> Any:
    rng = np.random.default_rng(100 + index)
    if kind == "normal":
        return (rng.standard_normal(shape) * 2).astype(dtype)
    if kind == "probs":
        raw = rng.random(shape) + 0.1
        return (raw / raw.sum(axis=-1, keepdims=True)).astype(dtype)
    if kind == "onehot":
        classes = shape[-1]
        return np.eye(classes, dtype=dtype)[rng.integers(0, classes, shape[:-1])]
    if kind.startswith("ints"):
        high = int(kind[4:])
        return rng.integers(0, high, shape).astype(dtype)
    if kind == "binary":
        return rng.integers(0, 2, shape).astype(dtype)
    if kind == "large":
        return (rng.standard_normal(shape) * 200).astype(dtype)
    raise ValueError(kind)


def inputs_of(case: Case) -> list[Any]:
    return [_array(i, *spec) for i, spec in enumerate(case.inputs)]


def _cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    m23 = (2, 3)
    for dtype in FLOATS:
        x = ((dtype, (3, 4), "normal"),)
        for fn in ("relu", "relu6", "elu", "sigmoid", "tanh", "softmax", "log_softmax"):
            cases[f"nn.{fn} {dtype}"] = Case("nn", f"tf.nn.{fn}(x0)", x, (0,))
        cases[f"tf.sigmoid {dtype}"] = Case("nn", "tf.sigmoid(x0 * 10)", x)
        cases[f"nn.softmax large {dtype}"] = Case(
            "nn", "tf.nn.softmax(x0)", ((dtype, (2, 5), "large"),), (0,)
        )
        cases[f"nn.l2_loss {dtype}"] = Case("nn", "tf.nn.l2_loss(x0)", x, (0,))
        cases[f"nn.bias_add {dtype}"] = Case(
            "nn", "tf.nn.bias_add(x0, x1)", (*x, (dtype, (4,), "normal")), (0, 1)
        )
        cases[f"nn.bias_add NCHW {dtype}"] = Case(
            "nn",
            "tf.nn.bias_add(x0, x1, data_format='NCHW')",
            ((dtype, (2, 3, 2), "normal"), (dtype, (3,), "normal")),
            (0, 1),
        )
        cases[f"nn.xw_plus_b {dtype}"] = Case(
            "nn",
            "tf.nn.xw_plus_b(x0, x1, x2)",
            ((dtype, m23, "normal"), (dtype, (3, 4), "normal"), (dtype, (4,), "normal")),
            (2,),
        )
        for version in ("", "_v2"):
            cases[f"nn.softmax_cross_entropy_with_logits{version} {dtype}"] = Case(
                "nn",
                f"tf.nn.softmax_cross_entropy_with_logits{version}(labels=x1, logits=x0)",
                ((dtype, (3, 5), "normal"), (dtype, (3, 5), "probs")),
                (0, 1),
            )
        cases[f"nn.sparse_softmax_cross_entropy_with_logits {dtype}"] = Case(
            "nn",
            "tf.nn.sparse_softmax_cross_entropy_with_logits(labels=x1, logits=x0)",
            ((dtype, (4, 5), "normal"), ("int32", (4,), "ints5")),
            (0,),
        )
        cases[f"nn.sigmoid_cross_entropy_with_logits {dtype}"] = Case(
            "nn",
            "tf.nn.sigmoid_cross_entropy_with_logits(labels=x1, logits=x0)",
            ((dtype, (3, 4), "large"), (dtype, (3, 4), "binary")),
        )
        cases[f"clip_by_value {dtype}"] = Case("clip", "tf.clip_by_value(x0, -1.0, 0.5)", x)
        cases[f"clip_by_norm {dtype}"] = Case("clip", "tf.clip_by_norm(x0, 1.5)", x)
        cases[f"losses.mean_squared_error {dtype}"] = Case(
            "losses",
            "tf.losses.mean_squared_error(x1, x0)",
            ((dtype, m23, "normal"), (dtype, m23, "normal")),
        )
        cases[f"losses.softmax_cross_entropy {dtype}"] = Case(
            "losses",
            "tf.losses.softmax_cross_entropy(x1, x0)",
            ((dtype, (3, 5), "normal"), (dtype, (3, 5), "onehot")),
        )
    cases["nn.softmax axis 0"] = Case(
        "nn", "tf.nn.softmax(x0, axis=0)", (("float32", m23, "normal"),)
    )
    cases["nn.log_softmax axis 0"] = Case(
        "nn", "tf.nn.log_softmax(x0, axis=0)", (("float64", (3, 2, 2), "normal"),)
    )
    cases["nn.softmax_cross_entropy_with_logits_v2 axis 0"] = Case(
        "nn",
        "tf.nn.softmax_cross_entropy_with_logits_v2(labels=x1, logits=x0, axis=0)",
        (("float32", (4, 2, 3), "normal"), ("float32", (4, 2, 3), "probs")),
    )
    cases["nn.softmax_cross_entropy_with_logits 3-D"] = Case(
        "nn",
        "tf.nn.softmax_cross_entropy_with_logits(labels=x1, logits=x0)",
        (("float64", (2, 2, 3), "normal"), ("float64", (2, 2, 3), "probs")),
        (0,),
    )
    cases["nn.softmax 3-D"] = Case(
        "nn", "tf.nn.softmax(x0)", (("float32", (2, 2, 3), "normal"),), (0,)
    )
    cases["nn.relu int32"] = Case("nn", "tf.nn.relu(x0)", (("int32", (5,), "ints9"),))
    cases["nn.relu bool"] = Case("nn", "tf.nn.relu(x0)", (("bool", (2,), "binary"),))
    cases["nn.softmax int32"] = Case("nn", "tf.nn.softmax(x0)", (("int32", (2,), "ints3"),))
    cases["nn.bias_add wrong length"] = Case(
        "nn", "tf.nn.bias_add(x0, x1)", (("float32", m23, "normal"), ("float32", (2,), "normal"))
    )
    cases["nn.xent v1 positional"] = Case(
        "nn",
        "tf.nn.softmax_cross_entropy_with_logits(x1, x0)",
        (("float32", m23, "normal"), ("float32", m23, "probs")),
    )
    cases["nn.sparse xent label out of range"] = Case(
        "nn",
        "tf.nn.sparse_softmax_cross_entropy_with_logits(labels=x1, logits=x0)",
        (("float32", m23, "normal"), ("int64", (2,), "ints9")),
    )
    cases["nn.sparse xent rank mismatch"] = Case(
        "nn",
        "tf.nn.sparse_softmax_cross_entropy_with_logits(labels=x1, logits=x0)",
        (("float32", m23, "normal"), ("int32", m23, "ints3")),
    )
    cases["nn.in_top_k"] = Case(
        "nn",
        "tf.nn.in_top_k(x0, x1, 2)",
        (("float32", (4, 5), "normal"), ("int32", (4,), "ints5")),
    )
    cases["nn.in_top_k ties"] = Case(
        "nn", "tf.nn.in_top_k(tf.constant([[1., 1., 1.], [2., 1., 0.]]), tf.constant([2, 1]), 1)"
    )
    cases["nn.embedding_lookup"] = Case(
        "nn",
        "tf.nn.embedding_lookup(x0, x1)",
        (("float32", (5, 3), "normal"), ("int32", (2, 2), "ints5")),
    )
    cases["nn.dropout keep_prob"] = Case(
        "nn", "tf.nn.dropout(x0, keep_prob=0.6)", (("float32", (4, 5), "normal"),), seeded=True
    )
    cases["nn.dropout rate noise_shape"] = Case(
        "nn",
        "tf.nn.dropout(x0, rate=0.5, noise_shape=[4, 1], seed=7)",
        (("float64", (4, 5), "normal"),),
        runs=2,
    )
    cases["clip_by_global_norm"] = Case(
        "clip",
        "tf.clip_by_global_norm([x0, None, x1], 2.0)",
        (("float32", m23, "normal"), ("float32", (4,), "normal")),
    )
    cases["clip_by_global_norm IndexedSlices"] = Case(
        "clip",
        "[s.values if isinstance(s, tf.IndexedSlices) else s for s in "
        "tf.clip_by_global_norm([tf.IndexedSlices(x0, tf.constant([1, 3]), tf.constant([5, 3])), "
        "x1], 1.0)[0]]",
        (("float32", m23, "normal"), ("float32", (4,), "normal")),
    )
    cases["global_norm"] = Case(
        "clip",
        "tf.global_norm([x0, x1])",
        (("float64", m23, "normal"), ("float64", (4,), "normal")),
    )
    cases["clip_by_norm axes"] = Case(
        "clip", "tf.clip_by_norm(x0, 1.0, axes=[1])", (("float32", m23, "normal"),)
    )
    cases["losses.mse weights"] = Case(
        "losses",
        "tf.losses.mean_squared_error(x1, x0, weights=[[1.0], [0.0]])",
        (("float32", m23, "normal"), ("float32", m23, "normal")),
    )
    cases["losses.mse zero weight"] = Case(
        "losses",
        "tf.losses.mean_squared_error(x1, x0, weights=0.0)",
        (("float32", m23, "normal"), ("float32", m23, "normal")),
    )
    for reduction in ("NONE", "SUM", "MEAN", "SUM_OVER_BATCH_SIZE", "SUM_BY_NONZERO_WEIGHTS"):
        cases[f"losses.mse {reduction}"] = Case(
            "losses",
            f"tf.losses.mean_squared_error(x1, x0, weights=[[2.0], [0.5]], "
            f"reduction=tf.losses.Reduction.{reduction})",
            (("float32", m23, "normal"), ("float32", m23, "normal")),
        )
    cases["losses.softmax_cross_entropy smoothing"] = Case(
        "losses",
        "tf.losses.softmax_cross_entropy(x1, x0, weights=[2.0, 0.0, 1.0], label_smoothing=0.1)",
        (("float32", (3, 5), "normal"), ("float32", (3, 5), "onehot")),
    )
    cases["losses.sparse_softmax_cross_entropy"] = Case(
        "losses",
        "tf.losses.sparse_softmax_cross_entropy(x1, x0)",
        (("float32", (4, 5), "normal"), ("int32", (4,), "ints5")),
    )
    cases["losses.sparse_softmax_cross_entropy weights"] = Case(
        "losses",
        "tf.losses.sparse_softmax_cross_entropy(x1, x0, weights=[0.5, 2.0, 0.0, 1.0])",
        (("float64", (4, 5), "normal"), ("int64", (4,), "ints5")),
    )
    cases["losses collection"] = Case(
        "losses",
        "[tf.losses.mean_squared_error(x1, x0), tf.losses.softmax_cross_entropy(x1, x0), "
        "len(tf.get_collection('losses'))][2]",
        (("float32", m23, "normal"), ("float32", m23, "onehot")),
    )
    _random_cases(cases)
    return cases


def _random_cases(cases: dict[str, Case]) -> None:
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        for fn in ("random_normal", "truncated_normal", "random_uniform"):
            cases[f"{fn} {dtype}"] = Case(
                "random", f"tf.{fn}([3, 7], dtype=tf.{dtype})", seeded=True, runs=2, exact=True
            )
            cases[f"{fn} op seed {dtype}"] = Case(
                "random", f"tf.{fn}([257], dtype=tf.{dtype}, seed=99)", exact=True
            )
    for dtype in ("int32", "int64"):
        cases[f"random_uniform {dtype}"] = Case(
            "random",
            f"tf.random_uniform([9], -5, 2**30, dtype=tf.{dtype}, seed=3)",
            runs=2,
            exact=True,
        )
    cases["tf.random namespace"] = Case(
        "random",
        "[tf.random.normal([2]), tf.random.uniform([2], seed=8), tf.random.truncated_normal([3])][2]",
        seeded=True,
        exact=True,
    )
    cases["random_uniform minval maxval"] = Case(
        "random", "tf.random_uniform([2, 3], -2.0, 3.0)", seeded=True, exact=True
    )
    cases["random_normal mean stddev"] = Case(
        "random", "tf.random_normal([5], mean=3.0, stddev=0.5, seed=5)", exact=True
    )
    cases["truncated_normal mean stddev float64"] = Case(
        "random",
        "tf.truncated_normal([1001], 1.0, 0.1, dtype=tf.float64, seed=2**40)",
        exact=True,
    )
    cases["random ops counter"] = Case(
        "random",
        "[tf.random_uniform([2]), tf.truncated_normal([2]), tf.random_normal([2], seed=1)][-1]",
        seeded=True,
        exact=True,
    )
    cases["random_uniform int no maxval"] = Case(
        "random", "tf.random_uniform([2], dtype=tf.int32)", seeded=True
    )
    cases["random_uniform int minval >= maxval"] = Case(
        "random", "tf.random_uniform([2], 3, 3, dtype=tf.int32)", seeded=True
    )
    cases["random_normal int dtype"] = Case(
        "random", "tf.random_normal([2], dtype=tf.int32)", seeded=True
    )
    for init in (
        "tf.zeros_initializer()",
        "tf.ones_initializer()",
        "tf.constant_initializer(0.5)",
        "tf.constant_initializer([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])",
        "tf.random_normal_initializer(1.0, 0.5)",
        "tf.truncated_normal_initializer(stddev=0.1)",
        "tf.random_uniform_initializer(-0.1, 0.1)",
        "tf.glorot_uniform_initializer()",
        "tf.glorot_normal_initializer(seed=3)",
        "tf.variance_scaling_initializer(2.0, 'fan_in', 'untruncated_normal')",
        "tf.variance_scaling_initializer(distribution='uniform', mode='fan_out')",
        "tf.initializers.he_normal(seed=2)",
        "tf.initializers.he_uniform()",
        "tf.initializers.lecun_normal()",
        "tf.initializers.lecun_uniform(seed=4)",
        "tf.initializers.glorot_uniform()",
        "None",
    ):
        cases[f"get_variable {init}"] = Case(
            "variables",
            f"tf.get_variable('v', [2, 3], initializer={init})",
            seeded=True,
            exact=True,
        )
    cases["get_variable in scopes"] = Case(
        "variables",
        "[tf.get_variable('a', [3]), tf.variable_scope('s').__enter__(), "
        "tf.get_variable('w', [4, 2], dtype=tf.float64)][2]",
        seeded=True,
        exact=True,
    )
    cases["get_variable int32"] = Case(
        "variables", "tf.get_variable('n', [3], dtype=tf.int32)", seeded=True, exact=True
    )
    cases["Variable of truncated_normal"] = Case(
        "variables",
        "tf.Variable(tf.truncated_normal([2, 2], stddev=0.1))",
        seeded=True,
        exact=True,
    )


CASES = _cases()
RANDOM_EAGER = (
    "tf.truncated_normal([3])",
    "tf.random_uniform([2], seed=4)",
    "tf.random_uniform([2], seed=4)",
    "tf.random_normal([2], seed=4, dtype=tf.float64)",
    "tf.random_uniform([3], 0, 10, dtype=tf.int64)",
    "tf.nn.dropout(np.ones([2, 3], np.float32), rate=0.5)",
)


# Public functions and classes whose arguments (names, order, simple defaults)
# must be TensorFlow's.
SIGNATURES = (
    *(f"nn.{n}" for n in (
        "relu", "relu6", "elu", "sigmoid", "tanh", "softmax", "log_softmax", "bias_add",
        "xw_plus_b", "l2_loss", "softmax_cross_entropy_with_logits",
        "softmax_cross_entropy_with_logits_v2", "sparse_softmax_cross_entropy_with_logits",
        "sigmoid_cross_entropy_with_logits", "in_top_k", "embedding_lookup", "dropout")),
    *(f"losses.{n}" for n in (
        "mean_squared_error", "softmax_cross_entropy", "sparse_softmax_cross_entropy",
        "compute_weighted_loss", "get_losses", "get_regularization_losses", "get_total_loss",
        "add_loss")),
    "sigmoid", "tanh", "clip_by_value", "clip_by_norm", "clip_by_global_norm", "global_norm",
    "get_variable", "variable_scope", "get_variable_scope", "random_normal", "truncated_normal",
    "random_uniform", "set_random_seed", "random.normal", "random.uniform",
    "random.truncated_normal", "zeros_initializer", "ones_initializer", "constant_initializer",
    "random_normal_initializer", "truncated_normal_initializer", "random_uniform_initializer",
    "glorot_uniform_initializer", "glorot_normal_initializer", "variance_scaling_initializer",
    "initializers.he_normal", "initializers.he_uniform", "initializers.lecun_normal",
    "initializers.lecun_uniform",
)  # fmt: skip


def signature_of(tf: Any, dotted: str) -> list[list[Any]]:
    """The arguments of ``tf.<dotted>`` (a class: of its ``__init__``): name, kind
    and default (simple defaults only; others as ``"..."``)."""
    import inspect

    found = tf
    for part in dotted.split("."):
        found = getattr(found, part)
    target = getattr(found, "__init__") if isinstance(found, type) else found  # noqa: B009
    target = inspect.unwrap(target)
    listed = []
    for parameter in inspect.signature(target).parameters.values():
        if parameter.name == "self":
            continue
        default = parameter.default
        if default is inspect.Parameter.empty:
            default = "<required>"
        elif not isinstance(default, (type(None), bool, int, float, str)):
            default = "..."
        listed.append([parameter.name, parameter.kind.name, default])
    return listed


# --- outcomes ------------------------------------------------------------------


def _array_outcome(value: Any) -> dict[str, Any]:
    array = np.asarray(value)
    if array.dtype.kind in "fc" or array.dtype.name == "bfloat16":
        listed = np.asarray(array, np.float64).tolist()
    else:
        listed = array.tolist()
    return {"dtype": str(array.dtype), "shape": list(array.shape), "value": listed}


def _direct_gradients(tf: Any, result: Any, xs: list[Any], upstream: Any) -> list[Any]:
    """tf_accum without tf.gradients: the registered gradient function of the result's op."""
    from tf_accum.graph.gradient_registry import get_gradient_function

    op = result.op
    function = get_gradient_function(op)
    assert function is not None, op.type
    grads = [upstream] + [None] * (len(op.outputs) - 1)
    found = function(op, *grads)
    chosen = []
    for x in xs:
        match = [g for t, g in zip(op.inputs, found, strict=True) if t is x]
        chosen.append(match[0] if match else None)
    return chosen


def gradients_of(tf: Any, result: Any, xs: list[Any], upstream: Any) -> list[Any]:
    if tf.__name__.startswith("tf_accum"):
        return _direct_gradients(tf, result, xs, upstream)
    return list(tf.gradients(result, xs, grad_ys=upstream))


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)) and not hasattr(value, "indices"):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def outcome(tf: Any, name: str) -> dict[str, Any]:
    """What ``tf`` makes of case ``name`` (see the module's docstring)."""
    case = CASES[name]
    arrays = inputs_of(case)
    with tf.Graph().as_default():
        if case.seeded:
            tf.set_random_seed(SEED)
        xs = [tf.constant(a) for a in arrays]
        space = {"tf": tf, "np": np, **{f"x{i}": x for i, x in enumerate(xs)}}
        try:
            result = eval(case.expression, space)  # noqa: S307 - the table's own expressions
        except Exception as error:  # noqa: BLE001 - the outcome is the error's class
            return {"error": type(error).__name__}
        if isinstance(result, int):
            return {"value": result}
        results = [r for r in _flat(result) if r is not None]
        fetches: list[Any] = [r for r in results]
        shapes = [None if r.shape.rank is None else r.shape.as_list() for r in results]
        grads: list[Any] = []
        if case.gradients:
            wanted = [xs[i] for i in case.gradients]
            upstream_array = _array(99, results[0].dtype.name, tuple(shapes[0] or ()), "normal")
            upstream = tf.constant(upstream_array)
            grads = gradients_of(tf, results[0], wanted, upstream)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            try:
                runs = [session.run(fetches) for _ in range(case.runs)]
                grad_values = session.run([g for g in grads if g is not None]) if grads else []
            except tf.errors.OpError as error:
                return {"shapes": shapes, "run_error": type(error).__name__}
        found: dict[str, Any] = {
            "shapes": shapes,
            "runs": [[_array_outcome(v) for v in run] for run in runs],
        }
        if case.gradients:
            values = iter(grad_values)
            found["gradients"] = [
                None if g is None else _array_outcome(next(values)) for g in grads
            ]
        return found


def eager_outcomes(tf: Any, to_numpy: Any) -> list[Any]:
    tf.set_random_seed(SEED)
    found = []
    for expression in RANDOM_EAGER:
        value = eval(expression, {"tf": tf, "np": np})  # noqa: S307 - the table's own expressions
        found.append(_array_outcome(to_numpy(value)))
    tf.set_random_seed(SEED)
    found.append(_array_outcome(to_numpy(eval(RANDOM_EAGER[0], {"tf": tf, "np": np}))))  # noqa: S307
    return found


def outcomes(tf: Any, to_numpy: Any) -> dict[str, Any]:
    return {
        "graph": {name: outcome(tf, name) for name in CASES},
        "eager": eager_outcomes(tf, to_numpy),
    }


# --- comparing -----------------------------------------------------------------

# Relative to the largest magnitude of the expected values. float16 gets ten of its
# units in the last place: TensorFlow adds half-precision sums in half precision
# in Eigen's vector-packet order, which numpy's pairwise order does not reproduce.
TOLERANCE = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 2e-6, "float64": 1e-12}


def differences(got: Any, want: Any, exact: bool, path: str = "") -> list[str]:
    """Where ``got`` departs from ``want``: exactly for ``exact`` cases, else
    values within their dtype's rounding (relative to the largest magnitude)."""
    if isinstance(want, dict) and "value" in want and "dtype" in want:
        if not isinstance(got, dict) or got.get("dtype") != want["dtype"]:
            return [
                f"{path}: dtype {got.get('dtype') if isinstance(got, dict) else got} != {want['dtype']}"
            ]
        if got["shape"] != want["shape"]:
            return [f"{path}: shape {got['shape']} != {want['shape']}"]
        a = np.asarray(got["value"], dtype=np.float64 if want["dtype"] != "bool" else bool)
        b = np.asarray(want["value"], dtype=a.dtype)
        if exact or want["dtype"] not in TOLERANCE:
            same = np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        else:
            scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
            same = np.allclose(
                a,
                b,
                rtol=TOLERANCE[want["dtype"]],
                atol=TOLERANCE[want["dtype"]] * scale,
                equal_nan=True,
            )
        return [] if same else [f"{path}: {a.tolist()} != {b.tolist()}"]
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return [f"{path}: {got} != {want}"]
        found: list[str] = []
        for key in want:
            found += differences(got[key], want[key], exact, f"{path}.{key}")
        return found
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: {got} != {want}"]
        found = []
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            found += differences(g, w, exact, f"{path}[{i}]")
        return found
    return [] if got == want else [f"{path}: {got} != {want}"]


def tensorflow_outcomes() -> dict[str, Any]:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow

    v1 = tensorflow.compat.v1
    graph_found = {name: outcome(v1, name) for name in CASES}
    return {
        "graph": graph_found,
        "eager": eager_outcomes(v1, lambda t: t.numpy()),
        "signatures": {name: signature_of(v1, name) for name in SIGNATURES},
    }


if __name__ == "__main__":
    found = tensorflow_outcomes()
    if "--record" in sys.argv:
        RECORD.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(found['graph'])} cases", file=sys.stderr)
    elif "--check" in sys.argv:
        recorded = json.loads(RECORD.read_text())
        problems = differences(found, recorded, exact=True)
        for problem in problems:
            print(problem, file=sys.stderr)
        sys.exit(1 if problems else 0)
    else:
        print(json.dumps(found, sort_keys=True))
