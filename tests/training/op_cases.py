"""The table of training-op cases, and how one case's outcome is found.

A case is one training op (``ResourceApplyAdam``, ``ResourceSparseApplyAdagrad``,
...) in one dtype with given attributes, run eagerly for three steps on
variables of shape (3, 2) with given gradients (and, for the sparse ops, row
indices, a repeated one among them); its outcome is every variable's value
after each step. Error cases give the error class and message instead. The
same code finds TensorFlow's outcomes (recorded in ``op_tensorflow.json`` by
``python -m tests.training.op_cases --record``; without ``--record`` it
prints them) and tf_accum's.

Inputs are small binary fractions, exact in every dtype, so that a case
means the same on every platform.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tests.training.rounding import numpy_dtype

RECORD = Path(__file__).with_name("op_tensorflow.json")

DTYPES = ("float16", "bfloat16", "float32", "float64")
SHAPE = (3, 2)
STEPS = 3
SPARSE_INDICES = ([2, 0], [1, 1], [0])  # the second step names row 1 twice

# family -> (scalar inputs, slots holding only positive values, variants of attributes)
FAMILIES: dict[str, tuple[dict[str, float], tuple[str, ...], list[dict[str, bool]]]] = {
    "GradientDescent": ({"alpha": 0.1}, (), [{}]),
    "Momentum": ({"lr": 0.1, "momentum": 0.9}, (), [{}, {"use_nesterov": True}]),
    "Adam": (
        {
            "beta1_power": 0.9,
            "beta2_power": 0.999,
            "lr": 0.01,
            "beta1": 0.9,
            "beta2": 0.999,
            "epsilon": 1e-7,
        },
        ("v",),
        [{}, {"use_nesterov": True}],
    ),
    "Adagrad": ({"lr": 0.1}, ("accum",), [{}, {"update_slots": False}]),
    "AdagradV2": ({"lr": 0.1, "epsilon": 1e-3}, ("accum",), [{}]),
    "RMSProp": ({"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-3}, ("ms",), [{}]),
    "CenteredRMSProp": (
        {"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-3},
        ("ms",),
        [{}],
    ),
    "Adadelta": ({"lr": 1.0, "rho": 0.95, "epsilon": 1e-3}, ("accum", "accum_update"), [{}]),
    "Ftrl": (
        {"lr": 0.1, "l1": 0.05, "l2": 0.1, "lr_power": -0.5},
        ("accum",),
        [{}, {"multiply_linear_by_lr": True}],
    ),
    "FtrlV2": (
        {"lr": 0.1, "l1": 0.05, "l2": 0.1, "l2_shrinkage": 0.02, "lr_power": -0.5},
        ("accum",),
        [{}],
    ),
}
# Ftrl's other power takes another path of the kernel
EXTRA_SCALARS = {"Ftrl-power": ("Ftrl", {"lr_power": -0.7})}


def _values(seed: int, positive: bool, scale: float = 1 / 8) -> list[list[float]]:
    """Small binary fractions, different for each seed."""
    numbers = [((seed * 7 + i * 5) % 13 - 6) * scale for i in range(SHAPE[0] * SHAPE[1])]
    if positive:
        numbers = [abs(x) + 0.125 for x in numbers]
    return np.reshape(numbers, SHAPE).tolist()


def cases() -> dict[str, dict[str, Any]]:
    """Every case by id: op, dtype, attrs, scalars, initial values, steps."""
    from tf_accum.raw_ops.training import TRAINING_OPS, kernel_dtypes

    found: dict[str, dict[str, Any]] = {}
    families: list[tuple[str, str, dict[str, float], tuple[str, ...], list[dict[str, bool]]]] = [
        (name, name, *spec) for name, spec in FAMILIES.items()
    ]
    for label, (family, extra) in EXTRA_SCALARS.items():
        scalars, positive, _ = FAMILIES[family]
        families.append((label, family, {**scalars, **extra}, positive, [{}]))
    for label, family, scalars, positive, variants in families:
        for sparse in (False, True):
            op_type = f"Resource{'Sparse' if sparse else ''}Apply{family}"
            if op_type not in TRAINING_OPS:
                continue
            spec = TRAINING_OPS[op_type]
            for number, attrs in enumerate(variants):
                for dtype in DTYPES:
                    if dtype not in kernel_dtypes(op_type):
                        continue  # TensorFlow has no kernel for it
                    # a centred RMSProp's mean gradient stays below the root of its mean square
                    initial = {
                        name: _values(k + 1, name in positive, 1 / 32 if name == "mg" else 1 / 8)
                        for k, name in enumerate(spec.variables)
                    }
                    steps = []
                    for step in range(STEPS):
                        grad = _values(10 + step, False)
                        if sparse:
                            rows = SPARSE_INDICES[step]
                            steps.append(
                                {"grad": [grad[i] for i in range(len(rows))], "indices": rows}
                            )
                        else:
                            steps.append({"grad": grad})
                    case_id = f"{op_type}-{label}-{number}-{dtype}"
                    found[case_id] = {
                        "op": op_type,
                        "dtype": dtype,
                        "attrs": attrs,
                        "scalars": scalars,
                        "initial": initial,
                        "steps": steps,
                    }
    return found


def run_case(tf: Any, raw_ops: Any, case: dict[str, Any]) -> list[dict[str, Any]]:
    """The variables' values after each step (as lists), eagerly on ``tf``'s Variables."""
    from tf_accum.raw_ops.training import TRAINING_OPS

    spec = TRAINING_OPS[case["op"]]
    dtype = numpy_dtype(case["dtype"])
    variables = {
        name: tf.Variable(np.asarray(value, dtype)) for name, value in case["initial"].items()
    }
    op = getattr(raw_ops, case["op"])
    scalars = {name: np.asarray(value, dtype) for name, value in case["scalars"].items()}
    outcome = []
    for step in case["steps"]:
        kwargs: dict[str, Any] = {name: variables[name].handle for name in spec.variables}
        kwargs.update(scalars)
        kwargs[spec.gradient] = np.asarray(step["grad"], dtype)
        if "indices" in step:
            kwargs["indices"] = np.asarray(step["indices"], np.int64)
        op(**kwargs, **case["attrs"])
        outcome.append(
            {
                name: np.asarray(v.numpy()).astype(np.float64).tolist()
                for name, v in variables.items()
            }
        )
    return outcome


# --- errors: one call each, on fresh float32 variables ---

ERROR_CASES: dict[str, dict[str, Any]] = {
    "grad-shape": {
        "op": "ResourceApplyGradientDescent",
        "variables": {"var": [1.0, 2.0]},
        "inputs": {"alpha": 0.1, "delta": [1.0, 1.0, 1.0]},
    },
    "scalar-shape": {
        "op": "ResourceApplyGradientDescent",
        "variables": {"var": [1.0, 2.0]},
        "inputs": {"alpha": [0.1, 0.2], "delta": [1.0, 1.0]},
    },
    "slot-shape": {
        "op": "ResourceApplyMomentum",
        "variables": {"var": [1.0, 2.0], "accum": [0.0, 0.0, 0.0]},
        "inputs": {"lr": 0.1, "grad": [1.0, 1.0], "momentum": 0.9},
    },
    "adam-power-shape": {
        "op": "ResourceApplyAdam",
        "variables": {"var": [1.0, 2.0], "m": [0.0, 0.0], "v": [0.0, 0.0]},
        "inputs": {
            "beta1_power": [0.9],
            "beta2_power": 0.999,
            "lr": 0.1,
            "beta1": 0.9,
            "beta2": 0.999,
            "epsilon": 1e-8,
            "grad": [1.0, 1.0],
        },
    },
}
_ROWS = {"var": [[0.0, 0.0]] * 3, "accum": [[0.1, 0.1]] * 3}
for _label, _inputs in {
    "index-range": {"grad": [[1.0, 1.0]] * 2, "indices": [0, 5]},
    "index-negative": {"grad": [[1.0, 1.0]] * 2, "indices": [-1, 0]},
    "index-rank": {"grad": [[1.0, 1.0]] * 2, "indices": [[0, 1]]},
    "rows-dim1": {"grad": [[1.0, 1.0, 1.0]] * 2, "indices": [0, 1]},
    "rows-dim0": {"grad": [[1.0, 1.0]] * 3, "indices": [0, 1]},
    "rows-rank": {"grad": [1.0, 1.0], "indices": [0, 1]},
    "sparse-lr-shape": {"grad": [[1.0, 1.0]] * 2, "indices": [0, 1], "lr": [0.1]},
}.items():
    ERROR_CASES[_label] = {
        "op": "ResourceSparseApplyAdagrad",
        "variables": _ROWS,
        "inputs": {"lr": 0.1, **_inputs},
    }
ERROR_CASES["sparse-scalar-var"] = {
    "op": "ResourceSparseApplyAdagrad",
    "variables": {"var": 1.0, "accum": 1.0},
    "inputs": {"lr": 0.1, "grad": [1.0], "indices": [0]},
}


def run_error_case(tf: Any, raw_ops: Any, case: dict[str, Any]) -> dict[str, Any]:
    """The error class and its message (without TensorFlow's decoration), and
    whether the variables kept their values."""
    variables = {
        name: tf.Variable(np.asarray(value, np.float32))
        for name, value in case["variables"].items()
    }
    kwargs: dict[str, Any] = {name: v.handle for name, v in variables.items()}
    for name, value in case["inputs"].items():
        kwargs[name] = np.asarray(value, np.int64 if name == "indices" else np.float32)
    try:
        getattr(raw_ops, case["op"])(**kwargs)
    except Exception as error:  # noqa: BLE001 - the outcome is the error
        message = str(error)
        if message.startswith("{{function_node"):
            message = message.split("}} ", 1)[1]
        message = message.split(" [Op:", 1)[0]
        unchanged = all(
            np.array_equal(np.asarray(v.numpy()), np.asarray(case["variables"][name], np.float32))
            for name, v in variables.items()
        )
        return {"error": type(error).__name__, "message": message, "unchanged": unchanged}
    return {"error": None}


def tensorflow_outcomes() -> dict[str, Any]:
    import tensorflow as tensorflow_module

    tf = tensorflow_module.compat.v1
    return {
        "cases": {key: run_case(tf, tensorflow_module.raw_ops, c) for key, c in cases().items()},
        "errors": {
            key: run_error_case(tf, tensorflow_module.raw_ops, c) for key, c in ERROR_CASES.items()
        },
    }


if __name__ == "__main__":
    found = tensorflow_outcomes()
    text = json.dumps(found, separators=(",", ":"))
    if "--record" in sys.argv:
        RECORD.write_text(text + "\n")
        print(f"recorded {len(found['cases'])} cases and {len(found['errors'])} errors in {RECORD}")
    else:
        print(text)
