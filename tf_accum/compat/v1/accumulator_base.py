"""``tf.compat.v1.ConditionalAccumulatorBase``: what every accumulator class shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tf_accum import raw_ops
from tf_accum.compat.v1 import _symbolic
from tf_accum.dtypes import DType, as_dtype
from tf_accum.graph.graph import is_symbolic
from tf_accum.raw_ops.common import accumulator_stats, destroy_when_collected, resource_name
from tf_accum.raw_ops.constructors import INT64_MAX, accumulator_dtype, string_attr
from tf_accum.shapes import DeclaredShape, parse_tensor_shape


def check_reduction_type(reduction_type: Any, op_name: str) -> str:
    """ "MEAN" or "SUM" (as str or bytes; None means "MEAN", "" is refused, as in TensorFlow).

    Raises:
        TypeError: neither a string nor bytes.
        ValueError: another string (TensorFlow's graph-mode error).
    """
    checked = "MEAN" if reduction_type is None else string_attr(reduction_type, "reduction_type")
    if checked not in ("MEAN", "SUM"):
        raise ValueError(
            f"Attr 'reduction_type' of '{op_name}' Op passed string '{checked}' not "
            'in: "MEAN", "SUM".'
        )
    return checked


def check_tensor_shape_size(shape: DeclaredShape, given: Any) -> DeclaredShape:
    """Refuse dimensions above 2**63 - 1, as ``tf.TensorShape`` does.

    Raises:
        TypeError: a dimension out of the int64 range.
    """
    for size in shape or ():
        if size is not None and size > INT64_MAX:
            raise TypeError(
                f"Error converting {given!r} (arg name = shape) to a TensorShape: Value out "
                f"of range: {size}"
            )
    return shape


class _Ownership:
    """Owned by a private accumulator's objects (an original and its copies)."""

    __slots__ = ("__weakref__",)


class ConditionalAccumulatorBase:
    """An accumulator given by its handle: count, global step and attributes.

    Args:
        dtype: the accumulator's dtype (anything :func:`tf_accum.as_dtype` takes).
        shape: the declared shape, or None for an unknown shape.
        accumulator_ref: the integer handle of an existing accumulator.

    Raises:
        TypeError: ``dtype`` is not a dtype, or a dimension is not an integer.
        ValueError: a dimension is negative.

    Differs from TensorFlow (docs/departures.md T13): ``dtype`` is a tf_accum
    DType (equal to whatever it was made from), and ``name`` is the name given,
    or the resource's name.
    """

    def __init__(self, dtype: Any, shape: Any, accumulator_ref: Any) -> None:
        self._dtype = as_dtype(dtype)
        self._shape: DeclaredShape = parse_tensor_shape(shape)
        self._accumulator_ref = accumulator_ref
        if is_symbolic(accumulator_ref):
            # graph mode: the constructor op's own name, without its scope
            self._name = str(accumulator_ref.op.name).rsplit("/", 1)[-1]
        else:
            self._name = resource_name(accumulator_ref)
        self._finalizer: Any = None
        self._owner: _Ownership | None = None

    def _create_and_own(
        self,
        constructor: Callable[..., int],
        dtype: Any,
        shape: Any,
        shared_name: str | bytes | None,
        name: str,
        reduction_type: str | bytes | None,
    ) -> None:
        """What the subclasses' constructors share: check, create, and own the accumulator.

        A private accumulator (no shared_name) is destroyed with this object.
        """
        checked = accumulator_dtype(dtype)
        declared = check_tensor_shape_size(parse_tensor_shape(shape), shape)
        reduction_type = check_reduction_type(reduction_type, constructor.__name__)
        handle = constructor(
            dtype=checked,
            shape=None if declared is None else list(declared),
            shared_name=shared_name or "",
            name=name,
            reduction_type=reduction_type,
        )
        ConditionalAccumulatorBase.__init__(self, checked, declared, handle)
        if is_symbolic(handle):
            return  # graph mode: the accumulator lives as long as each session that makes it
        self._name = name
        if not shared_name:
            # copies share the ownership: the accumulator goes with the last of them
            self._owner = _Ownership()
            self._finalizer = destroy_when_collected(self._owner, handle)

    def __copy__(self) -> ConditionalAccumulatorBase:
        """A second object for the same accumulator (a private one lives while either does)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        return copy

    def __deepcopy__(self, memo: dict[int, Any]) -> ConditionalAccumulatorBase:
        """Refused: an accumulator is a resource with waiting takes, not a value to duplicate.

        Raises:
            TypeError: always; ``copy.copy`` gives a second object for the same accumulator.
        """
        raise TypeError(
            f"cannot deep-copy {type(self).__name__}: it is a handle to an accumulator, "
            "which is not duplicated; copy.copy gives a second object for the same one"
        )

    def __reduce__(self) -> Any:
        """Refused: a handle means nothing in another process (it could name another accumulator).

        Raises:
            TypeError: always.
        """
        raise TypeError(
            f"cannot pickle {type(self).__name__}: its handle names an accumulator of this "
            "process only. To reach one accumulator from several processes, give it a "
            "shared_name, use the distributed table (TF_ACCUM_RAY_ADDRESS), and create the "
            "object in each process with that shared_name"
        )

    @property
    def accumulator_ref(self) -> Any:
        """The integer handle the raw ops take (in graph mode, the handle Tensor)."""
        return self._accumulator_ref

    @property
    def name(self) -> str:
        """The accumulator's name."""
        return self._name

    @property
    def dtype(self) -> DType:
        """The accumulator's dtype."""
        return self._dtype

    def num_accumulated(self, name: str | None = None) -> Any:
        """The number of gradients accepted since the last take.

        Returns:
            numpy.int32 (graph mode: an int32 Tensor, by default named
            ``<name>_NumAccumulated``).

        Raises:
            NotFoundError: the accumulator was destroyed.
        """
        return raw_ops.ResourceAccumulatorNumAccumulated(
            handle=self._accumulator_ref, name=name or f"{self._name}_NumAccumulated"
        )

    def set_global_step(self, new_global_step: Any, name: str | None = None) -> Any:
        """Set the global step; floats are truncated toward zero first.

        Args:
            new_global_step: a number or (graph mode) a Tensor.

        Returns:
            None (graph mode: the Operation).

        Raises:
            UnimplementedError: a string.
            InvalidArgumentError: not a scalar.
            NotFoundError: the accumulator was destroyed.
        """
        return raw_ops.ResourceAccumulatorSetGlobalStep(
            handle=self._accumulator_ref,
            new_global_step=_symbolic.step(new_global_step),
            name=name,
        )

    def stats(self) -> dict[str, int | None]:
        """The accumulator's statistics: see :func:`tf_accum.accumulator_stats`.

        Differs from TensorFlow: TensorFlow's classes have no stats().

        Raises:
            NotFoundError: the accumulator was destroyed.
            TypeError: a graph-mode accumulator (its statistics live in each session).
        """
        if is_symbolic(self._accumulator_ref):
            raise TypeError(
                "stats() reads an eager accumulator; in graph mode the accumulator exists only "
                "inside each session that runs the graph"
            )
        return accumulator_stats(self._accumulator_ref)

    def close(self) -> Any:
        """Destroy the accumulator: waiting takes fail with CancelledError.

        Later calls raise NotFoundError. Closing twice is harmless. In graph
        mode this builds (and returns) the destroying Operation.

        Differs from TensorFlow (docs/departures.md T3): TensorFlow's classes
        have no close().
        """
        if self._finalizer is not None:
            self._finalizer.detach()
        return raw_ops.DestroyResourceOp(resource=self._accumulator_ref, ignore_lookup_error=True)
