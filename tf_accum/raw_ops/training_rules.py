"""What each training op computes: the variables' new values from their values,
the scalar inputs and the gradient.

Each rule computes in the variables' dtype (numpy rounds float16 after every
operation, as TensorFlow's CPU kernels do) and in the order of TensorFlow's
kernels, so results agree to the last bits; where TensorFlow's sparse kernel
writes a formula differently from its dense one, ``attrs["sparse"]`` says
which the op is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
Values = dict[str, Any]  # an op's named inputs (variables' values, scalars, grad)


Rule = Callable[[Values, Values], Values]


def _rsqrt(x: Array) -> Array:
    one: Array = np.ones((), x.dtype)
    return one / np.sqrt(x)


def _rsqrt_rounded_once(x: Array) -> Array:
    """1/sqrt(x) rounded once (TensorFlow's dense RMSProp kernel on float16)."""
    if x.dtype == np.float16:
        wide = x.astype(np.float32)
        once: Array = (np.float32(1) / np.sqrt(wide)).astype(np.float16)
        return once
    return _rsqrt(x)


def _moving_mean(old: Array, new: Array, rho: Array, sparse: bool) -> Array:
    """``rho * old + (1 - rho) * new``, as the dense and the sparse kernels write it."""
    one = np.ones((), old.dtype)
    if sparse:
        return old * rho + new * (one - rho)
    return old + (new - old) * (one - rho)


def _gradient_descent(s: Values, a: Values) -> Values:
    return {"var": s["var"] - s["delta"] * s["alpha"]}


def _momentum(s: Values, a: Values) -> Values:
    accum = s["accum"] * s["momentum"] + s["grad"]
    if a["use_nesterov"] and a["sparse"]:
        var = s["var"] - (s["grad"] * s["lr"] + accum * (s["momentum"] * s["lr"]))
    elif a["use_nesterov"]:
        var = s["var"] - (s["grad"] * s["lr"] + accum * s["momentum"] * s["lr"])
    else:
        var = s["var"] - accum * s["lr"]
    return {"var": var, "accum": accum}


def _adam(s: Values, a: Values) -> Values:
    # the same operations in the same order, in place on temporaries where that
    # saves a pass over memory (rounding is unchanged)
    one = np.ones((), s["var"].dtype)
    alpha = s["lr"] * np.sqrt(one - s["beta2_power"]) / (one - s["beta1_power"])
    g = s["grad"]
    m = np.subtract(g, s["m"])
    m *= one - s["beta1"]
    m += s["m"]
    v = np.square(g)
    v -= s["v"]
    v *= one - s["beta2"]
    v += s["v"]
    if a["use_nesterov"]:
        step = g * (one - s["beta1"])
        step += s["beta1"] * m
        step *= alpha
    else:
        step = m * alpha
    denominator = np.sqrt(v)
    denominator += s["epsilon"]
    step /= denominator
    return {"var": s["var"] - step, "m": m, "v": v}


def _adagrad(s: Values, a: Values) -> Values:
    accum = s["accum"] + np.square(s["grad"]) if a["update_slots"] else s["accum"]
    return {"var": s["var"] - s["grad"] * s["lr"] * _rsqrt(accum), "accum": accum}


def _adagrad_v2(s: Values, a: Values) -> Values:
    accum = s["accum"] + np.square(s["grad"]) if a["update_slots"] else s["accum"]
    var = s["var"] - s["grad"] * s["lr"] / (np.sqrt(accum) + s["epsilon"])
    return {"var": var, "accum": accum}


def _rms_prop(s: Values, a: Values) -> Values:
    g = s["grad"]
    ms = _moving_mean(s["ms"], np.square(g), s["rho"], a["sparse"])
    rsqrt = _rsqrt if a["sparse"] else _rsqrt_rounded_once
    mom = s["mom"] * s["momentum"] + rsqrt(ms + s["epsilon"]) * s["lr"] * g
    return {"var": s["var"] - mom, "ms": ms, "mom": mom}


def _centered_rms_prop(s: Values, a: Values) -> Values:
    g = s["grad"]
    ms = _moving_mean(s["ms"], np.square(g), s["rho"], a["sparse"])
    mg = _moving_mean(s["mg"], g, s["rho"], a["sparse"])
    denominator = (ms - np.square(mg)) + s["epsilon"]
    mom = s["mom"] * s["momentum"] + _rsqrt(denominator) * s["lr"] * g
    return {"var": s["var"] - mom, "ms": ms, "mg": mg, "mom": mom}


def _adadelta(s: Values, a: Values) -> Values:
    one = np.ones((), s["var"].dtype)
    g = s["grad"]
    accum = s["accum"] * s["rho"] + np.square(g) * (one - s["rho"])
    update = np.sqrt(s["accum_update"] + s["epsilon"]) * _rsqrt(accum + s["epsilon"]) * g
    accum_update = s["accum_update"] * s["rho"] + np.square(update) * (one - s["rho"])
    return {"var": s["var"] - update * s["lr"], "accum": accum, "accum_update": accum_update}


def _ftrl(s: Values, a: Values) -> Values:
    var, accum, g, lr = s["var"], s["accum"], s["grad"], s["lr"]
    two = np.asarray(2, var.dtype)
    shrunk = g + two * s["l2_shrinkage"] * var if "l2_shrinkage" in s else g
    new_accum = accum + np.square(g)
    power = s["lr_power"]
    if power == np.asarray(-0.5, power.dtype):
        new_root, old_root = np.sqrt(new_accum), np.sqrt(accum)
    else:
        new_root, old_root = np.power(new_accum, -power), np.power(accum, -power)
    l1, l2 = s["l1"], s["l2"]
    if a["multiply_linear_by_lr"]:
        linear = s["linear"] + (shrunk * lr - (new_root - old_root) * var)
        bound = l1 * lr
        y = new_root + two * l2 * lr
    else:
        linear = s["linear"] + (shrunk - (new_root - old_root) / lr * var)
        bound = l1
        y = new_root / lr + two * l2
    x = bound * np.sign(linear) - linear
    zero = np.zeros((), var.dtype)
    new_var = np.where(np.abs(linear) > bound, x / y, zero).astype(var.dtype)
    return {"var": new_var, "accum": new_accum, "linear": linear}


RULES: dict[str, Rule] = {
    "GradientDescent": _gradient_descent,
    "Momentum": _momentum,
    "Adam": _adam,
    "Adagrad": _adagrad,
    "AdagradV2": _adagrad_v2,
    "RMSProp": _rms_prop,
    "CenteredRMSProp": _centered_rms_prop,
    "Adadelta": _adadelta,
    "Ftrl": _ftrl,
    "FtrlV2": _ftrl,
}


__all__ = ["RULES", "Rule", "Values"]
