"""TensorFlow's training ops, by name: one optimizer step on variables, in place.

What each op computes is in :mod:`tf_accum.raw_ops.training_rules`; the checks,
the eager run and the table of ops in :mod:`tf_accum.raw_ops.training`.
"""

from __future__ import annotations

from typing import Any

from tf_accum.raw_ops.keyword_only import raw_op
from tf_accum.raw_ops.training import run_eagerly


@raw_op
def ApplyGradientDescent(
    *,
    var: Any,
    alpha: Any,
    delta: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> Any:
    """One GradientDescent step on ``var``, in place.

    TensorFlow's ``ApplyGradientDescent``; in the variables' dtype:

        var -= alpha * delta

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyGradientDescent", locals())


@raw_op
def ResourceApplyGradientDescent(
    *,
    var: Any,
    alpha: Any,
    delta: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> None:
    """One GradientDescent step on ``var``, in place.

    TensorFlow's ``ResourceApplyGradientDescent``; in the variables' dtype:

        var -= alpha * delta

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyGradientDescent", locals())


@raw_op
def ApplyMomentum(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    grad: Any,
    momentum: Any,
    use_locking: bool = False,
    use_nesterov: bool = False,
    name: str | None = None,
) -> Any:
    """One Momentum step on ``var`` and ``accum``, in place.

    TensorFlow's ``ApplyMomentum``; in the variables' dtype:

        accum = accum * momentum + grad
        var -= lr * accum
        (use_nesterov: var -= lr * grad + lr * momentum * accum)

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyMomentum", locals())


@raw_op
def SparseApplyMomentum(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    grad: Any,
    indices: Any,
    momentum: Any,
    use_locking: bool = False,
    use_nesterov: bool = False,
    name: str | None = None,
) -> Any:
    """One Momentum step on some rows of ``var`` and ``accum``, in place.

    TensorFlow's ``SparseApplyMomentum``; in the variables' dtype:

        accum = accum * momentum + grad
        var -= lr * accum
        (use_nesterov: var -= lr * grad + lr * momentum * accum)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("SparseApplyMomentum", locals())


@raw_op
def ResourceApplyMomentum(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    grad: Any,
    momentum: Any,
    use_locking: bool = False,
    use_nesterov: bool = False,
    name: str | None = None,
) -> None:
    """One Momentum step on ``var`` and ``accum``, in place.

    TensorFlow's ``ResourceApplyMomentum``; in the variables' dtype:

        accum = accum * momentum + grad
        var -= lr * accum
        (use_nesterov: var -= lr * grad + lr * momentum * accum)

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyMomentum", locals())


@raw_op
def ResourceSparseApplyMomentum(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    grad: Any,
    indices: Any,
    momentum: Any,
    use_locking: bool = False,
    use_nesterov: bool = False,
    name: str | None = None,
) -> None:
    """One Momentum step on some rows of ``var`` and ``accum``, in place.

    TensorFlow's ``ResourceSparseApplyMomentum``; in the variables' dtype:

        accum = accum * momentum + grad
        var -= lr * accum
        (use_nesterov: var -= lr * grad + lr * momentum * accum)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceSparseApplyMomentum", locals())


@raw_op
def ApplyAdam(
    *,
    var: Any,
    m: Any,
    v: Any,
    beta1_power: Any,
    beta2_power: Any,
    lr: Any,
    beta1: Any,
    beta2: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    use_nesterov: bool = False,
    name: str | None = None,
) -> Any:
    """One Adam step on ``var``, ``m`` and ``v``, in place.

    TensorFlow's ``ApplyAdam``; in the variables' dtype:

        lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
        m += (grad - m) * (1 - beta1)
        v += (grad**2 - v) * (1 - beta2)
        var -= lr_t * m / (sqrt(v) + epsilon)
        (use_nesterov: beta1 * m + (1 - beta1) * grad in place of m)

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyAdam", locals())


@raw_op
def ResourceApplyAdam(
    *,
    var: Any,
    m: Any,
    v: Any,
    beta1_power: Any,
    beta2_power: Any,
    lr: Any,
    beta1: Any,
    beta2: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    use_nesterov: bool = False,
    name: str | None = None,
) -> None:
    """One Adam step on ``var``, ``m`` and ``v``, in place.

    TensorFlow's ``ResourceApplyAdam``; in the variables' dtype:

        lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
        m += (grad - m) * (1 - beta1)
        v += (grad**2 - v) * (1 - beta2)
        var -= lr_t * m / (sqrt(v) + epsilon)
        (use_nesterov: beta1 * m + (1 - beta1) * grad in place of m)

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyAdam", locals())


@raw_op
def ApplyAdagrad(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    grad: Any,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> Any:
    """One Adagrad step on ``var`` and ``accum``, in place.

    TensorFlow's ``ApplyAdagrad``; in the variables' dtype:

        accum += grad**2  (unless update_slots is False)
        var -= lr * grad / sqrt(accum)

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyAdagrad", locals())


@raw_op
def SparseApplyAdagrad(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> Any:
    """One Adagrad step on some rows of ``var`` and ``accum``, in place.

    TensorFlow's ``SparseApplyAdagrad``; in the variables' dtype:

        accum += grad**2  (unless update_slots is False)
        var -= lr * grad / sqrt(accum)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("SparseApplyAdagrad", locals())


@raw_op
def ResourceApplyAdagrad(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    grad: Any,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> None:
    """One Adagrad step on ``var`` and ``accum``, in place.

    TensorFlow's ``ResourceApplyAdagrad``; in the variables' dtype:

        accum += grad**2  (unless update_slots is False)
        var -= lr * grad / sqrt(accum)

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyAdagrad", locals())


@raw_op
def ResourceSparseApplyAdagrad(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> None:
    """One Adagrad step on some rows of ``var`` and ``accum``, in place.

    TensorFlow's ``ResourceSparseApplyAdagrad``; in the variables' dtype:

        accum += grad**2  (unless update_slots is False)
        var -= lr * grad / sqrt(accum)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceSparseApplyAdagrad", locals())


@raw_op
def ApplyAdagradV2(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> Any:
    """One AdagradV2 step on ``var`` and ``accum``, in place.

    TensorFlow's ``ApplyAdagradV2``; in the variables' dtype:

        accum += grad**2  (unless update_slots is False)
        var -= lr * grad / (sqrt(accum) + epsilon)

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyAdagradV2", locals())


@raw_op
def SparseApplyAdagradV2(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    epsilon: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> Any:
    """One AdagradV2 step on some rows of ``var`` and ``accum``, in place.

    TensorFlow's ``SparseApplyAdagradV2``; in the variables' dtype:

        accum += grad**2  (unless update_slots is False)
        var -= lr * grad / (sqrt(accum) + epsilon)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("SparseApplyAdagradV2", locals())


@raw_op
def ResourceApplyAdagradV2(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> None:
    """One AdagradV2 step on ``var`` and ``accum``, in place.

    TensorFlow's ``ResourceApplyAdagradV2``; in the variables' dtype:

        accum += grad**2  (unless update_slots is False)
        var -= lr * grad / (sqrt(accum) + epsilon)

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyAdagradV2", locals())


@raw_op
def ResourceSparseApplyAdagradV2(
    *,
    var: Any,
    accum: Any,
    lr: Any,
    epsilon: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    update_slots: bool = True,
    name: str | None = None,
) -> None:
    """One AdagradV2 step on some rows of ``var`` and ``accum``, in place.

    TensorFlow's ``ResourceSparseApplyAdagradV2``; in the variables' dtype:

        accum += grad**2  (unless update_slots is False)
        var -= lr * grad / (sqrt(accum) + epsilon)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceSparseApplyAdagradV2", locals())


@raw_op
def ApplyRMSProp(
    *,
    var: Any,
    ms: Any,
    mom: Any,
    lr: Any,
    rho: Any,
    momentum: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> Any:
    """One RMSProp step on ``var``, ``ms`` and ``mom``, in place.

    TensorFlow's ``ApplyRMSProp``; in the variables' dtype:

        ms = rho * ms + (1 - rho) * grad**2
        mom = momentum * mom + lr * grad / sqrt(ms + epsilon)
        var -= mom

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyRMSProp", locals())


@raw_op
def SparseApplyRMSProp(
    *,
    var: Any,
    ms: Any,
    mom: Any,
    lr: Any,
    rho: Any,
    momentum: Any,
    epsilon: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> Any:
    """One RMSProp step on some rows of ``var``, ``ms`` and ``mom``, in place.

    TensorFlow's ``SparseApplyRMSProp``; in the variables' dtype:

        ms = rho * ms + (1 - rho) * grad**2
        mom = momentum * mom + lr * grad / sqrt(ms + epsilon)
        var -= mom

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("SparseApplyRMSProp", locals())


@raw_op
def ResourceApplyRMSProp(
    *,
    var: Any,
    ms: Any,
    mom: Any,
    lr: Any,
    rho: Any,
    momentum: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> None:
    """One RMSProp step on ``var``, ``ms`` and ``mom``, in place.

    TensorFlow's ``ResourceApplyRMSProp``; in the variables' dtype:

        ms = rho * ms + (1 - rho) * grad**2
        mom = momentum * mom + lr * grad / sqrt(ms + epsilon)
        var -= mom

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyRMSProp", locals())


@raw_op
def ResourceSparseApplyRMSProp(
    *,
    var: Any,
    ms: Any,
    mom: Any,
    lr: Any,
    rho: Any,
    momentum: Any,
    epsilon: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> None:
    """One RMSProp step on some rows of ``var``, ``ms`` and ``mom``, in place.

    TensorFlow's ``ResourceSparseApplyRMSProp``; in the variables' dtype:

        ms = rho * ms + (1 - rho) * grad**2
        mom = momentum * mom + lr * grad / sqrt(ms + epsilon)
        var -= mom

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceSparseApplyRMSProp", locals())


@raw_op
def ApplyCenteredRMSProp(
    *,
    var: Any,
    mg: Any,
    ms: Any,
    mom: Any,
    lr: Any,
    rho: Any,
    momentum: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> Any:
    """One CenteredRMSProp step on ``var``, ``mg``, ``ms`` and ``mom``, in place.

    TensorFlow's ``ApplyCenteredRMSProp``; in the variables' dtype:

        ms = rho * ms + (1 - rho) * grad**2
        mg = rho * mg + (1 - rho) * grad
        mom = momentum * mom + lr * grad / sqrt(ms - mg**2 + epsilon)
        var -= mom

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyCenteredRMSProp", locals())


@raw_op
def SparseApplyCenteredRMSProp(
    *,
    var: Any,
    mg: Any,
    ms: Any,
    mom: Any,
    lr: Any,
    rho: Any,
    momentum: Any,
    epsilon: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> Any:
    """One CenteredRMSProp step on some rows of ``var``, ``mg``, ``ms`` and ``mom``, in place.

    TensorFlow's ``SparseApplyCenteredRMSProp``; in the variables' dtype:

        ms = rho * ms + (1 - rho) * grad**2
        mg = rho * mg + (1 - rho) * grad
        mom = momentum * mom + lr * grad / sqrt(ms - mg**2 + epsilon)
        var -= mom

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("SparseApplyCenteredRMSProp", locals())


@raw_op
def ResourceApplyCenteredRMSProp(
    *,
    var: Any,
    mg: Any,
    ms: Any,
    mom: Any,
    lr: Any,
    rho: Any,
    momentum: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> None:
    """One CenteredRMSProp step on ``var``, ``mg``, ``ms`` and ``mom``, in place.

    TensorFlow's ``ResourceApplyCenteredRMSProp``; in the variables' dtype:

        ms = rho * ms + (1 - rho) * grad**2
        mg = rho * mg + (1 - rho) * grad
        mom = momentum * mom + lr * grad / sqrt(ms - mg**2 + epsilon)
        var -= mom

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyCenteredRMSProp", locals())


@raw_op
def ResourceSparseApplyCenteredRMSProp(
    *,
    var: Any,
    mg: Any,
    ms: Any,
    mom: Any,
    lr: Any,
    rho: Any,
    momentum: Any,
    epsilon: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> None:
    """One CenteredRMSProp step on some rows of ``var``, ``mg``, ``ms`` and ``mom``, in place.

    TensorFlow's ``ResourceSparseApplyCenteredRMSProp``; in the variables' dtype:

        ms = rho * ms + (1 - rho) * grad**2
        mg = rho * mg + (1 - rho) * grad
        mom = momentum * mom + lr * grad / sqrt(ms - mg**2 + epsilon)
        var -= mom

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceSparseApplyCenteredRMSProp", locals())


@raw_op
def ApplyAdadelta(
    *,
    var: Any,
    accum: Any,
    accum_update: Any,
    lr: Any,
    rho: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> Any:
    """One Adadelta step on ``var``, ``accum`` and ``accum_update``, in place.

    TensorFlow's ``ApplyAdadelta``; in the variables' dtype:

        accum = rho * accum + (1 - rho) * grad**2
        update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
        accum_update = rho * accum_update + (1 - rho) * update**2
        var -= lr * update

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyAdadelta", locals())


@raw_op
def SparseApplyAdadelta(
    *,
    var: Any,
    accum: Any,
    accum_update: Any,
    lr: Any,
    rho: Any,
    epsilon: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> Any:
    """One Adadelta step on some rows of ``var``, ``accum`` and ``accum_update``, in place.

    TensorFlow's ``SparseApplyAdadelta``; in the variables' dtype:

        accum = rho * accum + (1 - rho) * grad**2
        update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
        accum_update = rho * accum_update + (1 - rho) * update**2
        var -= lr * update

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("SparseApplyAdadelta", locals())


@raw_op
def ResourceApplyAdadelta(
    *,
    var: Any,
    accum: Any,
    accum_update: Any,
    lr: Any,
    rho: Any,
    epsilon: Any,
    grad: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> None:
    """One Adadelta step on ``var``, ``accum`` and ``accum_update``, in place.

    TensorFlow's ``ResourceApplyAdadelta``; in the variables' dtype:

        accum = rho * accum + (1 - rho) * grad**2
        update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
        accum_update = rho * accum_update + (1 - rho) * update**2
        var -= lr * update

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyAdadelta", locals())


@raw_op
def ResourceSparseApplyAdadelta(
    *,
    var: Any,
    accum: Any,
    accum_update: Any,
    lr: Any,
    rho: Any,
    epsilon: Any,
    grad: Any,
    indices: Any,
    use_locking: bool = False,
    name: str | None = None,
) -> None:
    """One Adadelta step on some rows of ``var``, ``accum`` and ``accum_update``, in place.

    TensorFlow's ``ResourceSparseApplyAdadelta``; in the variables' dtype:

        accum = rho * accum + (1 - rho) * grad**2
        update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
        accum_update = rho * accum_update + (1 - rho) * update**2
        var -= lr * update

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceSparseApplyAdadelta", locals())


@raw_op
def ApplyFtrl(
    *,
    var: Any,
    accum: Any,
    linear: Any,
    grad: Any,
    lr: Any,
    l1: Any,
    l2: Any,
    lr_power: Any,
    use_locking: bool = False,
    multiply_linear_by_lr: bool = False,
    name: str | None = None,
) -> Any:
    """One Ftrl step on ``var``, ``accum`` and ``linear``, in place.

    TensorFlow's ``ApplyFtrl``; in the variables' dtype:

        new_accum = accum + grad**2
        linear += grad - (new_accum**-lr_power - accum**-lr_power) / lr * var
        var = (l1 * sign(linear) - linear) / (new_accum**-lr_power / lr + 2 * l2)
            where |linear| > l1, else 0
        accum = new_accum
        (multiply_linear_by_lr: linear is kept multiplied by lr)

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyFtrl", locals())


@raw_op
def SparseApplyFtrl(
    *,
    var: Any,
    accum: Any,
    linear: Any,
    grad: Any,
    indices: Any,
    lr: Any,
    l1: Any,
    l2: Any,
    lr_power: Any,
    use_locking: bool = False,
    multiply_linear_by_lr: bool = False,
    name: str | None = None,
) -> Any:
    """One Ftrl step on some rows of ``var``, ``accum`` and ``linear``, in place.

    TensorFlow's ``SparseApplyFtrl``; in the variables' dtype:

        new_accum = accum + grad**2
        linear += grad - (new_accum**-lr_power - accum**-lr_power) / lr * var
        var = (l1 * sign(linear) - linear) / (new_accum**-lr_power / lr + 2 * l2)
            where |linear| > l1, else 0
        accum = new_accum
        (multiply_linear_by_lr: linear is kept multiplied by lr)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("SparseApplyFtrl", locals())


@raw_op
def ResourceApplyFtrl(
    *,
    var: Any,
    accum: Any,
    linear: Any,
    grad: Any,
    lr: Any,
    l1: Any,
    l2: Any,
    lr_power: Any,
    use_locking: bool = False,
    multiply_linear_by_lr: bool = False,
    name: str | None = None,
) -> None:
    """One Ftrl step on ``var``, ``accum`` and ``linear``, in place.

    TensorFlow's ``ResourceApplyFtrl``; in the variables' dtype:

        new_accum = accum + grad**2
        linear += grad - (new_accum**-lr_power - accum**-lr_power) / lr * var
        var = (l1 * sign(linear) - linear) / (new_accum**-lr_power / lr + 2 * l2)
            where |linear| > l1, else 0
        accum = new_accum
        (multiply_linear_by_lr: linear is kept multiplied by lr)

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyFtrl", locals())


@raw_op
def ResourceSparseApplyFtrl(
    *,
    var: Any,
    accum: Any,
    linear: Any,
    grad: Any,
    indices: Any,
    lr: Any,
    l1: Any,
    l2: Any,
    lr_power: Any,
    use_locking: bool = False,
    multiply_linear_by_lr: bool = False,
    name: str | None = None,
) -> None:
    """One Ftrl step on some rows of ``var``, ``accum`` and ``linear``, in place.

    TensorFlow's ``ResourceSparseApplyFtrl``; in the variables' dtype:

        new_accum = accum + grad**2
        linear += grad - (new_accum**-lr_power - accum**-lr_power) / lr * var
        var = (l1 * sign(linear) - linear) / (new_accum**-lr_power / lr + 2 * l2)
            where |linear| > l1, else 0
        accum = new_accum
        (multiply_linear_by_lr: linear is kept multiplied by lr)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceSparseApplyFtrl", locals())


@raw_op
def ApplyFtrlV2(
    *,
    var: Any,
    accum: Any,
    linear: Any,
    grad: Any,
    lr: Any,
    l1: Any,
    l2: Any,
    l2_shrinkage: Any,
    lr_power: Any,
    use_locking: bool = False,
    multiply_linear_by_lr: bool = False,
    name: str | None = None,
) -> Any:
    """One FtrlV2 step on ``var``, ``accum`` and ``linear``, in place.

    TensorFlow's ``ApplyFtrlV2``; in the variables' dtype:

        as ApplyFtrl, with grad + 2 * l2_shrinkage * var in the update of linear
        (new_accum still adds grad**2)

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ApplyFtrlV2", locals())


@raw_op
def SparseApplyFtrlV2(
    *,
    var: Any,
    accum: Any,
    linear: Any,
    grad: Any,
    indices: Any,
    lr: Any,
    l1: Any,
    l2: Any,
    l2_shrinkage: Any,
    lr_power: Any,
    use_locking: bool = False,
    multiply_linear_by_lr: bool = False,
    name: str | None = None,
) -> Any:
    """One FtrlV2 step on some rows of ``var``, ``accum`` and ``linear``, in place.

    TensorFlow's ``SparseApplyFtrlV2``; in the variables' dtype:

        as ApplyFtrl, with grad + 2 * l2_shrinkage * var in the update of linear
        (new_accum still adds grad**2)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables themselves (TensorFlow's refs) and returns ``var``'s new
    value; builds in graph mode only (eagerly RuntimeError, as in TensorFlow).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("SparseApplyFtrlV2", locals())


@raw_op
def ResourceApplyFtrlV2(
    *,
    var: Any,
    accum: Any,
    linear: Any,
    grad: Any,
    lr: Any,
    l1: Any,
    l2: Any,
    l2_shrinkage: Any,
    lr_power: Any,
    use_locking: bool = False,
    multiply_linear_by_lr: bool = False,
    name: str | None = None,
) -> None:
    """One FtrlV2 step on ``var``, ``accum`` and ``linear``, in place.

    TensorFlow's ``ResourceApplyFtrlV2``; in the variables' dtype:

        as ApplyFtrl, with grad + 2 * l2_shrinkage * var in the update of linear
        (new_accum still adds grad**2)

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceApplyFtrlV2", locals())


@raw_op
def ResourceSparseApplyFtrlV2(
    *,
    var: Any,
    accum: Any,
    linear: Any,
    grad: Any,
    indices: Any,
    lr: Any,
    l1: Any,
    l2: Any,
    l2_shrinkage: Any,
    lr_power: Any,
    use_locking: bool = False,
    multiply_linear_by_lr: bool = False,
    name: str | None = None,
) -> None:
    """One FtrlV2 step on some rows of ``var``, ``accum`` and ``linear``, in place.

    TensorFlow's ``ResourceSparseApplyFtrlV2``; in the variables' dtype:

        as ApplyFtrl, with grad + 2 * l2_shrinkage * var in the update of linear
        (new_accum still adds grad**2)

    Rows are updated in the order of ``indices``; a repeated index is updated twice.

    Takes the variables' handles (``Variable.handle``); returns None (eagerly) or
    the Operation (graph mode).

    Raises:
        InvalidArgumentError: shapes other than ``var``'s, scalars that are not
            scalars, indices out of range, inputs of another dtype; nothing changes.
    """
    return run_eagerly("ResourceSparseApplyFtrlV2", locals())


__all__ = [
    "ApplyGradientDescent",
    "ResourceApplyGradientDescent",
    "ApplyMomentum",
    "SparseApplyMomentum",
    "ResourceApplyMomentum",
    "ResourceSparseApplyMomentum",
    "ApplyAdam",
    "ResourceApplyAdam",
    "ApplyAdagrad",
    "SparseApplyAdagrad",
    "ResourceApplyAdagrad",
    "ResourceSparseApplyAdagrad",
    "ApplyAdagradV2",
    "SparseApplyAdagradV2",
    "ResourceApplyAdagradV2",
    "ResourceSparseApplyAdagradV2",
    "ApplyRMSProp",
    "SparseApplyRMSProp",
    "ResourceApplyRMSProp",
    "ResourceSparseApplyRMSProp",
    "ApplyCenteredRMSProp",
    "SparseApplyCenteredRMSProp",
    "ResourceApplyCenteredRMSProp",
    "ResourceSparseApplyCenteredRMSProp",
    "ApplyAdadelta",
    "SparseApplyAdadelta",
    "ResourceApplyAdadelta",
    "ResourceSparseApplyAdadelta",
    "ApplyFtrl",
    "SparseApplyFtrl",
    "ResourceApplyFtrl",
    "ResourceSparseApplyFtrl",
    "ApplyFtrlV2",
    "SparseApplyFtrlV2",
    "ResourceApplyFtrlV2",
    "ResourceSparseApplyFtrlV2",
]
