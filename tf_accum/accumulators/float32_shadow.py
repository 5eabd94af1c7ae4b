"""float16 and bfloat16 running sums, kept in float32 and rounded per add.

numpy's half loops (and ml_dtypes' bfloat16 loops) are scalar code, many
times slower than float32 vector code. One add of two narrow values done in
float32 and rounded to the narrow type gives the correctly rounded narrow sum
(24 >= 2 * 11 + 2 bits), which is what numpy, ml_dtypes and TensorFlow's
kernels compute; so a round keeps its sum as float32 images of narrow values
and rounds the bits after every add, with integer operations. With numba
installed (the ``fast`` extra), large sums run the hot part of each add as one
compiled loop instead (tf_accum/accumulators/half_kernel.py), and a MEAN take
divides there too.

This module holds what both types share (:class:`Float32ShadowSum`: the float32
shadow, its chunks, the choice between the compiled loops and
numpy's passes, an add as one call); each type's image and checks are in its
own module (tf_accum/accumulators/half_sum.py, bfloat16_sum.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum.accumulators import division, float_errors, half_kernel
from tf_accum.accumulators.float_errors import add_ignoring_float_errors

Array = np.ndarray[Any, Any]

_ONE = np.uint32(1)
CHUNK = 262_144  # elements per pass: few GIL hand-offs, working set near the L2


def round_bits(bits: Array, scratch: Array, low_bits: int, keep: Any, halfway: Any) -> None:
    """Round the float32 patterns ``bits`` (uint32) to nearest-even at ``low_bits``,
    clearing them: ``bits + halfway + (bit low_bits) & keep``."""
    np.right_shift(bits, low_bits, out=scratch)
    np.bitwise_and(scratch, _ONE, out=scratch)
    np.add(bits, scratch, out=bits)
    np.add(bits, halfway, out=bits)
    np.bitwise_and(bits, keep, out=bits)


class Float32ShadowSum:
    """A running float16 or bfloat16 sum, kept in float32 and rounded per add.

    Until something other than a finite number turns up, the sum lives in a
    float32 ``shadow`` (each element the exact image of a narrow value), and a
    gradient is added in chunks: widen it (exactly), add in float32, round the
    bits to the narrow precision. After that the round falls back to numpy's own
    narrow arithmetic (``exact``), so that infinities and NaN payloads are
    exactly numpy's. Subclasses define the image and the checks. Besides the
    shadow (twice the narrow sum's size) a round holds a fixed scratch of
    ``CHUNK`` elements, so an apply allocates nothing.

    With numba there, a sum scans and adds contiguous gradients with the
    compiled loops of :mod:`half_kernel` (``_kernels``): the same operations on
    the same state, in one pass instead of ten numpy calls per chunk. A sum of ``half_kernel.MIN_ELEMENTS`` or more loads them; a smaller
    one uses them only if they are loaded already.
    """

    __slots__ = ("shadow", "exact", "dtype", "_scratch", "_bound", "_kernels", "pending")
    # largest magnitude field (bits & 0x7fff) of a finite value
    _LARGEST_FINITE: int

    def __init__(self, first: Array, dtype: np.dtype[Any]) -> None:
        self.dtype = dtype
        self.exact: Array | None = None
        self._bound = 0.0
        # the flat gradient of an add begun by one_call's loop and not yet
        # settled (see after_call)
        self.pending: Array | None = None
        self._kernels = (
            half_kernel.load() if first.size >= half_kernel.MIN_ELEMENTS else half_kernel.loaded()
        )
        self._scratch = np.empty(min(CHUNK, first.size), np.uint32)
        self.shadow = np.empty(first.shape, np.float32)
        gradient = _flat(first)
        largest = self._largest_magnitude(gradient)
        if largest > self._LARGEST_FINITE:
            self.exact = np.array(first, dtype, copy=True)
            return
        flat = self.shadow.reshape(-1)
        self._split(lambda lo, hi, scratch: self._widen(gradient[lo:hi], flat[lo:hi]))
        self._bound = self._value(largest)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.shadow.shape

    def _split(self, work: Callable[[int, int, Array], Any], whole: bool = False) -> list[Any]:
        """``work(lo, hi, scratch)`` over the flat elements, in chunks (``whole``:
        one, for the compiled loops, which need no scratch); returns what each
        chunk's call returned."""
        size = self.shadow.size
        scratch = self._scratch
        chunk = max(size, 1) if whole else CHUNK
        found: list[Any] = []
        for start in range(0, size, chunk):
            stop = min(start + chunk, size)
            found.append(work(start, stop, scratch[: stop - start]))
        return found

    def _largest_magnitude(self, gradient: Array) -> int:
        """The largest ``bits & 0x7fff`` of the narrow values (their sign dropped)."""
        if gradient.size == 0:
            return 0
        bits = gradient.view(np.uint16)
        kernels = self._kernels_for(gradient)
        if kernels is not None:
            scan = kernels.largest_magnitude
            return int(max(self._split(lambda lo, hi, _: scan(bits[lo:hi]), whole=True)))

        def chunk(lo: int, hi: int, scratch: Array) -> int:
            field = scratch.view(np.uint16)[: hi - lo]
            np.bitwise_and(bits[lo:hi], np.uint16(0x7FFF), out=field)
            return int(np.maximum.reduce(field))

        largest: int = max(self._split(chunk))
        return largest

    def _add_all(
        self, gradient: Array, compiled: Callable[[Array, Array], Any] | None
    ) -> list[Any]:
        """Add the flat ``gradient`` into the shadow: with the
        compiled loop ``compiled`` (a field of half_kernel.Kernels) if given,
        else in numpy chunks (``_add_chunk``). Returns what each call returned."""
        flat = self.shadow.reshape(-1)
        if compiled is not None:
            bits, gradient_bits = flat.view(np.uint32), gradient.view(np.uint16)
            return self._split(
                lambda lo, hi, _: compiled(bits[lo:hi], gradient_bits[lo:hi]), whole=True
            )
        return self._split(
            lambda lo, hi, scratch: self._add_chunk(flat[lo:hi], gradient[lo:hi], scratch)
        )

    def _kernels_for(self, gradient: Array) -> half_kernel.Kernels | None:
        """The compiled loops if this sum uses them and they take ``gradient``
        (flat; the loops take contiguous, aligned arrays only)."""
        if self._kernels is None:
            return None
        flags = gradient.flags
        return self._kernels if flags.c_contiguous and flags.aligned else None

    def result(self) -> Array:
        if self.exact is not None:
            if np.may_share_memory(self.exact, self.shadow):
                # narrowed over the shadow (HalfSum._narrow_in_place): the taker
                # gets an array of its own, not a view keeping twice its size alive
                own: Array = self.exact.copy()
                return own
            return self.exact
        return self._narrow()

    def divided(self, count: int) -> Array | None:
        """The sum divided by ``count`` as its dtype divides (a MEAN take's
        result, the bits of :meth:`result` then :func:`divide_in_place`), in one
        compiled pass over the shadow into a new array; None when the loops are
        not loaded or the round went on in numpy's narrow arithmetic."""
        kernels = self._kernels
        if kernels is None or self.exact is not None:
            return None
        divisor = np.float32(division.count_in(self.dtype, count))  # exact: a narrow value
        loop = self._narrow_dividing(kernels)
        out = np.empty(self.shadow.shape, np.uint16)
        bits = self.shadow.reshape(-1).view(np.uint32)
        loop(bits, out.reshape(-1), divisor)
        divided: Array = out.view(self.dtype)
        return divided

    # --- an add as one call (see one_call) ---

    def one_call(self, gradient: Array) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
        """``(loop, arguments)`` when adding ``gradient`` is one call of a
        compiled loop (or, once the sum is exact, of numpy's add) on this
        thread, else None (use :meth:`add`). The caller sets ``pending`` to
        the flat gradient, calls ``loop(*arguments)`` as the very next call,
        and hands what it returned to :meth:`after_call` (or, if an exception
        took it, calls :meth:`settle` on a thread where none can land)."""
        if self.exact is not None:
            if not float_errors.CONTEXT_LOCAL_ERRORS:
                return None
            return float_errors.runner_ignoring_float_errors(), (
                np.add,
                self.exact,
                gradient,
                self.exact,
            )
        if self._kernels is None:
            return None  # numpy's passes: several calls
        flat = _flat(gradient)
        kernels = self._kernels_for(flat)
        if kernels is None:
            return None
        bits = self.shadow.reshape(-1).view(np.uint32)
        return self._loop_call(kernels, bits, flat.view(np.uint16))

    def after_call(self, returned: Any) -> bool:
        """Record what one_call's loop returned: True when that settles the
        add (``pending`` is then cleared in the same statement), False when
        more must be done (see :meth:`settle`)."""
        if self.exact is not None:
            self.pending = None
            return True
        return self._settled(returned)

    def settle(self) -> None:
        """Finish the add of ``pending`` whose compiled loop has run: what it
        returned is found again from the gradient. Several calls: run it where
        no signal handler's exception lands (uninterrupted.run_uninterrupted)."""
        gradient = self.pending
        if gradient is not None:
            if self.exact is None:
                self._settle(gradient)
            self.pending = None

    def _loop_call(
        self, kernels: half_kernel.Kernels, bits: Array, gradient_bits: Array
    ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        raise NotImplementedError

    def _settled(self, returned: Any) -> bool:
        raise NotImplementedError

    def _settle(self, gradient: Array) -> None:
        raise NotImplementedError

    # --- subclass hooks ---
    def _narrow_dividing(self, kernels: half_kernel.Kernels) -> Callable[[Array, Array, Any], None]:
        """The compiled loop writing the shadow's values divided by a float32
        into narrow bit patterns: ``loop(shadow_bits, out_bits, divisor)``."""
        raise NotImplementedError

    def add(self, gradient: Array) -> None:
        if self.exact is not None:
            add_ignoring_float_errors(self.exact, gradient)
            return
        flat_gradient = _flat(gradient)
        self._add_shadow(gradient, flat_gradient, self._kernels_for(flat_gradient))

    def _add_shadow(
        self, gradient: Array, flat_gradient: Array, kernels: half_kernel.Kernels | None
    ) -> None:
        """Add ``gradient`` (flat: ``flat_gradient``) to the shadow, with the
        compiled ``kernels`` when they apply; the sum is not yet exact."""
        raise NotImplementedError

    def _value(self, magnitude: int) -> float:
        raise NotImplementedError

    def _widen(self, gradient: Array, out: Array) -> None:
        raise NotImplementedError

    def _add_chunk(self, shadow: Array, gradient: Array, scratch: Array) -> Any:
        raise NotImplementedError

    def _narrow(self) -> Array:
        raise NotImplementedError


def _flat(array: Array) -> Array:
    """A 1-D view of ``array`` (a copy only for layouts a view cannot express)."""
    return array.reshape(-1)
