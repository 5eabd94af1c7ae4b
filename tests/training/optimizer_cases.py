"""The table of optimizer cases, and how one case's outcome is found.

A case is one TF1 program: two variables (a (3, 2) matrix ``w`` and a vector
``b`` of 2), an optimizer (an expression over ``tf``), gradients fed through
placeholders (an ``IndexedSlices`` of ``w``'s rows, one row named twice, in the
sparse cases), ``apply_gradients`` with a global step, three steps run in a
Session. Its outcome is the names of the optimizer's variables and slots and
every global variable's value after each step. The same code finds TensorFlow's
outcomes (recorded in ``optimizer_tensorflow.json`` by
``python -m tests.training.optimizer_cases --record``; without ``--record``
it prints them) and tf_accum's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tests.training.rounding import numpy_dtype

RECORD = Path(__file__).with_name("optimizer_tensorflow.json")

DTYPES = ("float16", "bfloat16", "float32", "float64")
STEPS = 3
SPARSE_INDICES = ([2, 0], [1, 1, 2], [0])

OPTIMIZERS = {
    "sgd": "tf.train.GradientDescentOptimizer(0.1)",
    "momentum": "tf.train.MomentumOptimizer(0.1, 0.9)",
    "nesterov": "tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True)",
    "adam": "tf.train.AdamOptimizer(0.01, epsilon=1e-3)",
    "adagrad": "tf.train.AdagradOptimizer(0.1)",
    "rmsprop": "tf.train.RMSPropOptimizer(0.01)",
    "rmsprop-centered": "tf.train.RMSPropOptimizer(0.01, momentum=0.5, epsilon=1e-3, centered=True)",
    "adadelta": "tf.train.AdadeltaOptimizer(1.0, epsilon=1e-3)",
    "ftrl": "tf.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01, "
    "l2_regularization_strength=0.01)",
    "ftrl-shrinkage": "tf.train.FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=0.05, "
    "learning_rate_power=-0.7)",
    "sgd-exponential": "tf.train.GradientDescentOptimizer(tf.train.exponential_decay("
    "0.1, step, 2, 0.5, staircase=True))",
    "momentum-piecewise": "tf.train.MomentumOptimizer(tf.train.piecewise_constant("
    "step, [1, 2], [0.1, 0.05, 0.01]), 0.5)",
    "adam-polynomial": "tf.train.AdamOptimizer(tf.train.polynomial_decay("
    "0.05, step, 2, end_learning_rate=0.01, power=0.5))",
}
FLOAT32_ONLY = ("sgd-exponential", "momentum-piecewise", "adam-polynomial")


def _values(seed: int, shape: tuple[int, ...]) -> list[Any]:
    size = int(np.prod(shape))
    numbers = [((seed * 7 + i * 5) % 13 - 6) / 8 for i in range(size)]
    found: list[Any] = np.reshape(numbers, shape).tolist()
    return found


def cases() -> dict[str, dict[str, Any]]:
    found = {}
    for key, expression in OPTIMIZERS.items():
        for sparse in (False, True):
            for dtype in DTYPES:
                if key in FLOAT32_ONLY and dtype != "float32":
                    continue
                if sparse and key.startswith("rmsprop") and dtype == "bfloat16":
                    continue  # TensorFlow has no bfloat16 kernel of the sparse RMSProp ops
                steps = []
                for step in range(STEPS):
                    rows = SPARSE_INDICES[step]
                    w = _values(10 + step, (len(rows), 2) if sparse else (3, 2))
                    steps.append({"w": w, "b": _values(20 + step, (2,)), "indices": rows})
                found[f"{key}-{'sparse' if sparse else 'dense'}-{dtype}"] = {
                    "optimizer": expression,
                    "sparse": sparse,
                    "dtype": dtype,
                    "w": _values(1, (3, 2)),
                    "b": _values(2, (2,)),
                    "steps": steps,
                }
    return found


def run_case(tf: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Names of the optimizer's variables and slots, and every global variable's
    values (as float64 lists, by name) after each step."""
    dtype = numpy_dtype(case["dtype"])
    with tf.Graph().as_default():
        w = tf.Variable(np.asarray(case["w"], dtype), name="w")
        b = tf.Variable(np.asarray(case["b"], dtype), name="b")
        step = tf.train.get_or_create_global_step()
        optimizer = eval(case["optimizer"], {"tf": tf, "step": step})
        grad_b = tf.placeholder(case["dtype"], [2], name="grad_b")
        if case["sparse"]:
            rows = tf.placeholder(case["dtype"], [None, 2], name="rows")
            indices = tf.placeholder(tf.int64, [None], name="indices")
            grad_w: Any = tf.IndexedSlices(rows, indices)
        else:
            grad_w = tf.placeholder(case["dtype"], [3, 2], name="grad_w")
        train = optimizer.apply_gradients([(grad_w, w), (grad_b, b)], global_step=step)
        variables = tf.global_variables()
        outcome: dict[str, Any] = {
            "train_op": [train.name, train.type],
            "optimizer_variables": [v.name for v in optimizer.variables()],
            "slots": {
                name: [optimizer.get_slot(v, name).name for v in (w, b)]
                for name in optimizer.get_slot_names()
            },
            "steps": [],
        }
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for given in case["steps"]:
                feed = {grad_b: np.asarray(given["b"], dtype)}
                if case["sparse"]:
                    feed[rows] = np.asarray(given["w"], dtype)
                    feed[indices] = given["indices"]
                else:
                    feed[grad_w] = np.asarray(given["w"], dtype)
                sess.run(train, feed)
                values = sess.run({v.name: v for v in variables})
                outcome["steps"].append(
                    {
                        k: np.asarray(v).astype(np.float64).tolist()
                        for k, v in sorted(values.items())
                    }
                )
    return outcome


# --- beside the optimizers: where slots go, schedules, moving averages, minimize ---


def placement(tf: Any) -> dict[str, str]:
    """The device of each variable an Adam optimizer makes, under a replica_device_setter
    with two ps tasks (``w`` goes to the first, ``b`` to the second)."""
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(ps_tasks=2)):
            w = tf.Variable(np.zeros((3, 2), np.float32), name="w")
            b = tf.Variable(np.zeros(2, np.float32), name="b")
            optimizer = tf.train.AdamOptimizer(0.1)
            train = optimizer.apply_gradients([(tf.ones((3, 2)), w), (tf.ones(2), b)])
        found = {v.name: v.op.device for v in optimizer.variables()}
        found.update({v.name: v.op.device for v in (w, b)})
        found["train_op"] = train.device
        return found


SCHEDULES = {
    "exponential": "tf.train.exponential_decay(0.1, step, 3, 0.5)",
    "exponential-staircase": "tf.train.exponential_decay(0.1, step, 3, 0.5, staircase=True)",
    "exponential-float64": "tf.train.exponential_decay(np.float64(0.1), step, 3, 0.96)",
    "polynomial": "tf.train.polynomial_decay(0.1, step, 4, end_learning_rate=0.01, power=2.0)",
    "polynomial-cycle": "tf.train.polynomial_decay(0.1, step, 3, cycle=True)",
    "piecewise": "tf.train.piecewise_constant(step, [2, 4], [1.0, 0.5, 0.25])",
    "piecewise-int32-boundaries": "tf.train.piecewise_constant(step, [np.int32(2)], [1.0, 0.5])",
}


def schedules(tf: Any) -> dict[str, Any]:
    """Each schedule's dtype and value at global steps 0 to 7."""
    found: dict[str, Any] = {}
    for key, expression in SCHEDULES.items():
        with tf.Graph().as_default():
            step = tf.train.get_or_create_global_step()
            rate = eval(expression, {"tf": tf, "np": np, "step": step})
            bump = step.assign_add(1)
            values = []
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                for _ in range(8):
                    values.append(float(sess.run(rate)))
                    sess.run(bump)
            found[key] = {"dtype": rate.dtype.name, "values": values}
    return found


def moving_averages(tf: Any) -> dict[str, Any]:
    """Shadow names and values of an ExponentialMovingAverage over three changes of
    two variables, with and without ``num_updates``."""
    found: dict[str, Any] = {}
    for key, num_updates in (("plain", False), ("num_updates", True)):
        with tf.Graph().as_default():
            w = tf.Variable(np.asarray(_values(1, (3, 2)), np.float32), name="w")
            b = tf.Variable(np.asarray(_values(2, (2,)), np.float64), name="b")
            step = tf.train.get_or_create_global_step()
            ema = tf.train.ExponentialMovingAverage(0.9, num_updates=step if num_updates else None)
            update = ema.apply([w, b])
            change = tf.group(w.assign_add(tf.ones((3, 2))), b.assign_sub(tf.ones(2, tf.float64)))
            bump = step.assign_add(1)
            outcome: dict[str, Any] = {
                "names": [ema.average(w).name, ema.average(b).name, ema.average_name(w)],
                "update": [update.name, update.type],
                "restore": sorted(ema.variables_to_restore()),
                "steps": [],
            }
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                for _ in range(3):
                    sess.run(change)
                    sess.run(update)
                    sess.run(bump)
                    values = sess.run([ema.average(w), ema.average(b)])
                    outcome["steps"].append([np.asarray(v).tolist() for v in values])
            found[key] = outcome
    return found


def minimize(tf: Any) -> dict[str, Any]:
    """``minimize`` of ``sum((w - target)**2)`` for three steps of GradientDescent and Adam."""
    found: dict[str, Any] = {}
    for key, expression in (
        ("sgd", "tf.train.GradientDescentOptimizer(0.1)"),
        ("adam", "tf.train.AdamOptimizer(0.1)"),
    ):
        with tf.Graph().as_default():
            w = tf.Variable(np.asarray(_values(1, (3, 2)), np.float32), name="w")
            target = tf.constant(np.asarray(_values(5, (3, 2)), np.float32))
            loss = tf.reduce_sum(tf.square(w - target))
            step = tf.train.get_or_create_global_step()
            train = eval(expression, {"tf": tf}).minimize(loss, global_step=step)
            outcome: dict[str, Any] = {"train_op": [train.name, train.type], "steps": []}
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                for _ in range(3):
                    sess.run(train)
                    outcome["steps"].append(sess.run(w).tolist())
            found[key] = outcome
    return found


SIGNATURE_METHODS = {
    "Optimizer": ["__init__", "minimize", "compute_gradients", "apply_gradients", "get_slot",
                  "get_slot_names", "variables", "get_name"],
    "GradientDescentOptimizer": ["__init__"],
    "MomentumOptimizer": ["__init__"],
    "AdamOptimizer": ["__init__"],
    "AdagradOptimizer": ["__init__"],
    "RMSPropOptimizer": ["__init__"],
    "AdadeltaOptimizer": ["__init__"],
    "FtrlOptimizer": ["__init__"],
    "ExponentialMovingAverage": ["__init__", "apply", "average", "average_name",
                                 "variables_to_restore"],
    "exponential_decay": [""],
    "piecewise_constant": [""],
    "polynomial_decay": [""],
}  # fmt: skip


def signatures(tf: Any) -> dict[str, list[list[str]]]:
    """Argument names and defaults (as text) of the optimizers' public methods and the schedules."""
    import inspect

    found: dict[str, list[list[str]]] = {}
    for name, methods in SIGNATURE_METHODS.items():
        owner = getattr(tf.train, name)
        for method in methods:
            function = getattr(owner, method) if method else owner
            found[f"{name}.{method}".rstrip(".")] = [
                [p.name, "<required>" if p.default is inspect.Parameter.empty else repr(p.default)]
                for p in inspect.signature(function).parameters.values()
                if p.name != "self"
            ]
    return found


def name_scopes(tf: Any) -> list[list[str]]:
    """Adam's variables built inside a name scope, with and without
    ``use_own_namescope_for_non_slot_vars``, and a GradientDescent step's op names."""
    with tf.Graph().as_default():
        w = tf.Variable(np.zeros(2, np.float32), name="w")
        with tf.name_scope("outer"):
            own = tf.train.AdamOptimizer(0.1, use_own_namescope_for_non_slot_vars=True)
            own.apply_gradients([(tf.ones(2), w)])
            plain = tf.train.AdamOptimizer(0.1)
            plain.apply_gradients([(tf.ones(2), w)])
            step = tf.train.GradientDescentOptimizer(0.1).apply_gradients(
                [(tf.ones(2), w)], name="sgd_step"
            )
        updates = [op.name for op in step.control_inputs]
        return [
            [v.name for v in own.variables()],
            [v.name for v in plain.variables()],
            [step.name, step.type, *updates],
        ]


def tensorflow_outcomes() -> dict[str, Any]:
    import tensorflow.compat.v1 as tf

    return {
        "cases": {key: run_case(tf, case) for key, case in cases().items()},
        "placement": placement(tf),
        "schedules": schedules(tf),
        "moving_averages": moving_averages(tf),
        "minimize": minimize(tf),
        "signatures": signatures(tf),
        "name_scopes": name_scopes(tf),
    }


if __name__ == "__main__":
    found = tensorflow_outcomes()
    text = json.dumps(found, separators=(",", ":"))
    if "--record" in sys.argv:
        RECORD.write_text(text + "\n")
        print(f"recorded {len(found['cases'])} cases and the other programs in {RECORD}")
    else:
        print(text)
