"""Arithmetic in the accumulator's own dtype, shared by dense and sparse.

IEEE overflow and NaN are results, not errors, as in TensorFlow's kernels, so
floating-point warnings are silenced around the accumulator's own arithmetic.

Two kinds of fast path live here, each giving exactly the bits of the simple
numpy operation it replaces (tests/test_fast_paths.py holds them to it):

- large element-wise work (adds, divisions, copies) is split over a small pool
  of threads above a measured size: numpy releases the GIL inside its loops;
- a MEAN's division by a power of two multiplies by its exact reciprocal
  (:func:`exact_reciprocal`), the same bits at a fraction of a division's cost;
- float16 and bfloat16 sums are kept in float32 and rounded to the narrow type
  after every add, with integer operations on the bits, because numpy's half
  loops (and ml_dtypes' bfloat16 loops) are scalar code, many times slower
  than float32 vector code. One add of two halves done in float32 and rounded
  to half gives the correctly rounded half sum (24 >= 2 * 11 + 2 bits), which
  is what numpy, ml_dtypes and TensorFlow's kernels compute. With numba
  installed (the ``fast`` extra), large sums run the hot part of each add as
  one compiled loop instead (tf_accum/accumulators/half_kernel.py), and a
  MEAN take divides there too.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import ml_dtypes
import numpy as np

from tf_accum.accumulators import half_kernel
from tf_accum.context_blocks import ContextBlock

Array = np.ndarray[Any, Any]

try:
    # numpy >= 2 keeps its floating-point error state in a context variable;
    # setting it directly costs 0.2 us where entering np.errstate costs 0.8 us,
    # which matters on the per-apply path. tests/test_fast_paths.py runs the
    # public fallback below too.
    from numpy._core.umath import _extobj_contextvar, _make_extobj

    _IGNORE = _make_extobj(all="ignore")
    _QUIET: tuple[Any, Any] | None = (_extobj_contextvar, _IGNORE)

    def quiet_float_errors() -> Any:
        return ContextBlock(_extobj_contextvar, _IGNORE)

    def _add_quietly(total: Array, gradient: Any) -> None:
        token = _extobj_contextvar.set(_IGNORE)
        try:
            np.add(total, gradient, total)
        finally:
            _extobj_contextvar.reset(token)

except ImportError:  # numpy < 2
    _QUIET = None

    def quiet_float_errors() -> Any:
        return np.errstate(all="ignore")

    def _add_quietly(total: Array, gradient: Any) -> None:
        with np.errstate(all="ignore"):
            np.add(total, gradient, total)


def _add(total: Array, gradient: Any) -> None:
    np.add(total, gradient, total)


def in_place_adder(dtype: np.dtype[Any]) -> Callable[[Array, Any], None]:
    """``total += gradient`` for ``dtype``; integer arrays wrap without warnings already."""
    return _add if dtype.kind in "iu" else _add_quietly


# --- a small pool of threads for large arrays ----------------------------------

WORKERS = max(1, min(os.cpu_count() or 1, 4))
# Element counts from which splitting pays, measured with benchmarks/bench_threads.py
# on 2 shared cores (2 cores): below them a thread hand-off costs
# more than it saves. Copies into new arrays gain most (page faults run in
# parallel); adds and divisions of warm float32 are bound by memory and gain
# only when the other core is idle; float16/bfloat16 sums (~10 passes of
# numpy calls, each handing the GIL over) gain from about 4e6 elements and were
# unsteady at 1e6 next to TensorFlow's spinning threads; with the compiled loops
# (half_kernel) they lose below 4e6 (1e6: 0.68x) and gain 0.94-1.2x at 4e6 and
# 1.04-1.2x at 1e7, bound by memory. Copies start at 2e6, not
# 1e6 (where they gained alone), as threads already applying in parallel lost.
PARALLEL_MIN_ELEMENTS = 4_000_000
COPY_PARALLEL_MIN_ELEMENTS = 2_000_000
NARROW_PARALLEL_MIN_ELEMENTS = 4_000_000
# Finding a count's exact reciprocal (exact_reciprocal) costs about 2.5 us, and
# multiplying by it saves 20-40 ps an element over dividing: below this a MEAN
# divides (divide_in_place of 1 element by 4: 5.2 us with it, 2.5 us without).
RECIPROCAL_MIN_ELEMENTS = 1 << 16
# The compiled float16/bfloat16 division (a MEAN take's) on two threads, taking
# 3 gradients, one thread against two: float16 0.45/0.61 ms at 3e5 elements,
# 0.87/0.78 at 1e6, 3.3/2.1 at 4e6; bfloat16 0.15/0.26, 0.38/0.39, 1.18/0.81.
NARROW_DIVIDE_PARALLEL = 1_000_000

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    # a forked child has none of the parent's threads: start a new pool there
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _helpers() -> ThreadPoolExecutor:
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(WORKERS - 1, thread_name_prefix="tf_accum")
            pool = _pool
    return pool


def run_split(parts: Sequence[Callable[[], None]]) -> None:
    """Run ``parts`` (independent pieces of one operation) on the pool and here.

    Returns when every part has finished, even when one raised (or the caller
    was interrupted), so no helper still writes into the arrays afterwards;
    then re-raises the first error.
    """
    if len(parts) == 1:
        parts[0]()
        return
    pool = _helpers()
    futures: list[Future[None]] = [pool.submit(part) for part in parts[1:]]
    error: BaseException | None = None
    try:
        parts[0]()
    except BaseException as exc:
        error = exc
    for future in futures:
        while True:
            try:
                future.result()
                break
            except BaseException as exc:  # the part's error, or an interrupt while waiting
                if error is None:
                    error = exc
                if future.done():
                    break
    if error is not None:
        raise error


def _bounds(length: int, pieces: int) -> list[tuple[int, int]]:
    step = -(-length // pieces)
    return [(lo, min(lo + step, length)) for lo in range(0, length, step)]


def split_elementwise(
    fn: Callable[..., None], arrays: Sequence[Array], min_elements: int | None = None
) -> None:
    """``fn(*arrays)`` for same-shaped arrays, split along the first axis over threads.

    ``fn`` must be element-wise, so that its result on slices is its result on
    the whole. Small arrays (and arrays with a first axis of length 1) run here.
    """
    first = arrays[0]
    if min_elements is None:
        min_elements = PARALLEL_MIN_ELEMENTS
    if WORKERS < 2 or first.size < min_elements or first.ndim == 0 or first.shape[0] < 2:
        fn(*arrays)
        return

    def part(lo: int, hi: int) -> Callable[[], None]:
        return lambda: fn(*(a[lo:hi] for a in arrays))

    run_split([part(lo, hi) for lo, hi in _bounds(first.shape[0], WORKERS)])


def parallel_copy(source: Array, dtype: np.dtype[Any], out: Array | None = None) -> Array:
    """A C-ordered array of ``dtype`` equal to ``source`` (the simple path:
    ``np.array(source, dtype, copy=True)``), filled by several threads when large:
    a new one, or ``out`` (C-ordered, of ``source``'s shape and ``dtype``)."""
    if out is None:
        if source.size < COPY_PARALLEL_MIN_ELEMENTS:
            return np.array(source, dtype, copy=True)
        out = np.empty(source.shape, dtype)
    elif source.size < COPY_PARALLEL_MIN_ELEMENTS:
        np.copyto(out, source, casting="unsafe")
        return out
    split_elementwise(
        lambda o, s: np.copyto(o, s, casting="unsafe"), (out, source), COPY_PARALLEL_MIN_ELEMENTS
    )
    return out


def add_in_place(total: Array, gradient: Array) -> None:
    """``total += gradient`` quietly, in ``total``'s dtype, split over threads when large."""
    adder = in_place_adder(total.dtype)
    if total.size < PARALLEL_MIN_ELEMENTS:
        adder(total, gradient)
    else:
        split_elementwise(adder, (total, gradient))


def count_in(dtype: np.dtype[Any], counts: Any) -> Array:
    """``counts`` (a MEAN take's, a scalar or per-row) converted to ``dtype``,
    which a MEAN divides by, as TensorFlow's kernels do; from 65520 on a
    float16 count is infinite, quietly."""
    with quiet_float_errors():
        converted: Array = np.asarray(counts).astype(dtype)
    return converted


def exact_reciprocal(divisor: Array) -> Array | None:
    """``1 / divisor`` in its dtype when multiplying by it divides exactly, else None.

    That is when ``divisor`` (a real floating scalar, float16, bfloat16, float32
    or float64) is a power of two whose reciprocal the dtype holds: ``x * (1/d)``
    and ``x / d`` are then one correctly rounded operation on the same real
    number, so they give the same bits for every ``x`` (subnormals, infinities,
    signed zeros and NaNs included). A multiplication costs a fraction of a
    division: dividing 1e7 float32 elements took 1.3 ms on two threads, and
    multiplying it by 0.25 took 1.1 ms (1.85 against 1.42 ms on one).
    """
    if divisor.ndim or not (divisor.dtype.kind == "f" or divisor.dtype == ml_dtypes.bfloat16):
        return None
    value = float(divisor)
    if not 0.0 < value < math.inf or math.frexp(value)[0] != 0.5:
        return None
    with quiet_float_errors():
        reciprocal = np.divide(np.ones((), divisor.dtype), divisor)
    # exact: both are powers of two in a double's range; an underflowed or
    # rounded reciprocal gives something else
    return reciprocal if float(reciprocal) * value == 1.0 else None


def _compiled_narrow_division(total: Array, divisor: Array) -> Callable[[Array], None] | None:
    """The compiled division of a C-contiguous float16 or bfloat16 ``total`` by
    the scalar ``divisor`` (taking its uint16 bits), when half_kernel's loops
    are loaded; else None. numpy's own float16 division and ml_dtypes' bfloat16
    division are scalar code: dividing 1e6 elements took 3.3 and 2.0 ms,
    against 0.5 and 0.3 ms in the loops (same bits)."""
    kernels = half_kernel.loaded()
    if kernels is None or divisor.ndim or not total.flags.c_contiguous:
        return None
    if total.dtype == np.float16:
        loop = kernels.divide_half
    elif total.dtype == ml_dtypes.bfloat16:
        loop = kernels.divide_bfloat16
    else:
        return None
    wide = np.float32(divisor)  # exact: every float16 and bfloat16 is a float32

    def divide(bits: Array) -> None:
        loop(bits, wide)

    return divide


def divide_in_place(
    total: Array, counts: Any, before_writing: Callable[[], None] | None = None
) -> Array:
    """Divide ``total`` by ``counts`` (a scalar or per-row array), in its own dtype.

    ``before_writing`` is called once nothing can fail any more, just before
    ``total`` changes (an integer division allocates first).

    Floating and complex types divide by the count converted to the dtype (so
    float16 rounds exactly as TensorFlow's kernels do). Integer types divide
    exactly and truncate toward zero; the quotient always fits the dtype because
    its magnitude never exceeds the total's.
    """
    dtype = total.dtype
    if dtype.kind not in "iu":
        divisor = count_in(dtype, counts)
        compiled = _compiled_narrow_division(total, divisor)
        small = total.size < RECIPROCAL_MIN_ELEMENTS
        reciprocal = None if compiled is not None or small else exact_reciprocal(divisor)

        def divide(part: Array) -> None:
            # each thread has its own floating-point error state
            with quiet_float_errors():
                if reciprocal is None:
                    np.divide(part, divisor, out=part)
                else:
                    np.multiply(part, reciprocal, out=part)

        if before_writing is not None:
            before_writing()
        if compiled is not None:
            split_elementwise(
                compiled, (total.reshape(-1).view(np.uint16),), NARROW_DIVIDE_PARALLEL
            )
        elif divisor.ndim == 0:
            split_elementwise(divide, (total,))
        else:
            divide(total)
        return total
    wide_type = np.int64 if dtype.kind == "i" else np.uint64
    wide = total.astype(wide_type)
    divisor = np.asarray(counts, dtype=wide_type)
    quotient = wide // divisor
    if dtype.kind == "i":
        # floor division rounds negative quotients down; truncation rounds up.
        quotient += (wide - quotient * divisor != 0) & (wide < 0)
    narrow = quotient.astype(dtype)
    if before_writing is not None:
        before_writing()
    total[...] = narrow
    return total


# --- a round's running sum ------------------------------------------------------


# Bits of a float32 that is the (scaled) image of a float16: see HalfSum.
_HALF_SIGN_FIX = np.uint32(0x8FFFFFFF)
_HALF_KEEP = np.uint32(0xFFFFE000)
_HALF_HALFWAY = np.uint32(0x0FFF)
_HALF_INF = 0x0F800000
_LARGEST_HALF = 65504.0  # the largest finite float16
_BF16_KEEP = np.uint32(0xFFFF0000)
_BF16_HALFWAY = np.uint32(0x7FFF)
_ONE = np.uint32(1)
CHUNK = 262_144  # elements per pass: few GIL hand-offs, working set near the L2


def _round_bits(bits: Array, scratch: Array, low_bits: int, keep: Any, halfway: Any) -> None:
    """Round the float32 patterns ``bits`` (uint32) to nearest-even at ``low_bits``,
    clearing them: ``bits + halfway + (bit low_bits) & keep``."""
    np.right_shift(bits, low_bits, out=scratch)
    np.bitwise_and(scratch, _ONE, out=scratch)
    np.add(bits, scratch, out=bits)
    np.add(bits, halfway, out=bits)
    np.bitwise_and(bits, keep, out=bits)


class _NarrowSum:
    """A running float16 or bfloat16 sum, kept in float32 and rounded per add.

    Until something other than a finite number turns up, the sum lives in a
    float32 ``shadow`` (each element the exact image of a narrow value), and a
    gradient is added in chunks: widen it (exactly), add in float32, round the
    bits to the narrow precision. After that the round falls back to numpy's own
    narrow arithmetic (``exact``), so that infinities and NaN payloads are
    exactly numpy's. Subclasses define the image and the checks. Besides the
    shadow (twice the narrow sum's size) a round holds a fixed scratch of
    ``CHUNK`` elements per thread, so an apply allocates nothing.

    With numba there, a sum scans and adds contiguous gradients with the
    compiled loops of :mod:`half_kernel` (``_kernels``): the same operations on
    the same state, in one pass per thread instead of ten numpy calls per
    chunk. A sum of ``half_kernel.MIN_ELEMENTS`` or more loads them; a smaller
    one uses them only if they are loaded already.
    """

    __slots__ = ("shadow", "exact", "dtype", "_scratch", "_bound", "_kernels")
    # largest magnitude field (bits & 0x7fff) of a finite value
    _LARGEST_FINITE: int

    def __init__(self, first: Array, dtype: np.dtype[Any]) -> None:
        self.dtype = dtype
        self.exact: Array | None = None
        self._bound = 0.0
        self._kernels = (
            half_kernel.load() if first.size >= half_kernel.MIN_ELEMENTS else half_kernel.loaded()
        )
        parts = WORKERS if first.size >= NARROW_PARALLEL_MIN_ELEMENTS else 1
        self._scratch = np.empty((parts, min(CHUNK, first.size)), np.uint32)
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
        one per thread, for the compiled loops, which need no scratch), one range
        per thread; returns what each chunk's call returned."""
        size = self.shadow.size
        scratch = self._scratch
        chunk = max(size, 1) if whole else CHUNK
        found: list[Any] = []

        def part(index: int, lo: int, hi: int) -> Callable[[], None]:
            def run() -> None:
                for start in range(lo, hi, chunk):
                    stop = min(start + chunk, hi)
                    found.append(work(start, stop, scratch[index, : stop - start]))

            return run

        run_split([part(i, lo, hi) for i, (lo, hi) in enumerate(_bounds(size, len(scratch)))])
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
        """Add the flat ``gradient`` into the shadow, over the threads: with the
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
        divisor = np.float32(count_in(self.dtype, count))  # exact: a narrow value
        loop = self._narrow_dividing(kernels)
        out = np.empty(self.shadow.shape, np.uint16)
        bits = self.shadow.reshape(-1).view(np.uint32)
        split_elementwise(
            lambda part, into: loop(part, into, divisor),
            (bits, out.reshape(-1)),
            NARROW_DIVIDE_PARALLEL,
        )
        divided: Array = out.view(self.dtype)
        return divided

    # --- subclass hooks ---
    def _narrow_dividing(self, kernels: half_kernel.Kernels) -> Callable[[Array, Array, Any], None]:
        """The compiled loop writing the shadow's values divided by a float32
        into narrow bit patterns: ``loop(shadow_bits, out_bits, divisor)``."""
        raise NotImplementedError

    def add(self, gradient: Array) -> None:
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


class HalfSum(_NarrowSum):
    """float16. The image of a half with bits ``h`` is the float32 with bits
    ``sign(h) << 31 | (h & 0x7fff) << 13``: the half's value times 2**-112, exact
    for every finite half (subnormals included), so float32 adds are exact
    images too, and rounding to half is rounding the bits at bit 13. Overflow
    past the largest half cannot be seen in the image (its infinity is a finite
    float32), so a bound on the sum's magnitude is kept, and the sum is
    checked when the bound reaches the largest half."""

    __slots__ = ()
    _LARGEST_FINITE = half_kernel.LARGEST_FINITE_HALF

    def _past_largest(self) -> bool:
        """Whether the bound on the sum's magnitude reached the largest half:
        the sum may have rounded past it, to an infinity."""
        return self._bound >= _LARGEST_HALF

    def add(self, gradient: Array) -> None:
        if self.exact is not None:
            _add_quietly(self.exact, gradient)
            return
        flat_gradient = _flat(gradient)
        kernels = self._kernels_for(flat_gradient)
        if kernels is not None:
            self._add_checked(flat_gradient, kernels)
            return
        largest = self._largest_magnitude(flat_gradient)
        if largest > self._LARGEST_FINITE:
            self.exact = self._narrow()
            _add_quietly(self.exact, gradient)
            return
        self._add_all(flat_gradient, None)
        self._bound += self._value(largest)
        if self._past_largest():
            self._check_overflow()

    def _add_checked(self, gradient: Array, kernels: half_kernel.Kernels) -> None:
        """Add the flat ``gradient`` with the compiled loop that scans and adds
        block by block (half_kernel.add_half_checked), one part per thread. A
        part stops before a block holding an infinity or NaN; the round then
        goes on in numpy's float16 arithmetic, which adds what the loop left.
        Element by element that is the same add, so the bits are those of
        scanning the whole gradient first. Once a block is added, no buffer is
        allocated: the float16 sum is made in the shadow's own memory, and the
        rest is added in place between contiguous float16 arrays."""
        bits, gradient_bits = self.shadow.reshape(-1).view(np.uint32), gradient.view(np.uint16)
        checked, block = kernels.add_half_checked, half_kernel.BLOCK
        parts = self._split(
            lambda lo, hi, _: (lo, hi, *checked(bits[lo:hi], gradient_bits[lo:hi], block)),
            whole=True,
        )
        # the blocks added count toward the bound, also for the narrowing below
        self._bound += self._value(max((largest for _, _, largest, _ in parts), default=0))
        left = [(lo + added, hi) for lo, hi, _, added in parts if lo + added < hi]
        if left:
            exact = self._narrow_in_place().reshape(-1)
            for lo, hi in left:
                _add_quietly(exact[lo:hi], gradient[lo:hi])
        elif self._past_largest():
            self._check_overflow()

    def _narrow_in_place(self) -> Array:
        """Go on in numpy's float16 arithmetic: ``exact``, which this returns,
        is the sum narrowed over the shadow's own memory (by the compiled loop,
        or without it by numpy, chunk after chunk from the front), so that a
        round switching after or midway through an add needs no new buffer."""
        bits = self.shadow.reshape(-1).view(np.uint32)
        clamp = self._past_largest()
        if self._kernels is not None:
            self._kernels.narrow_half_into(bits, bits.view(np.uint16), clamp)
        else:
            # element i's two bytes land in element i // 2's, which an earlier
            # chunk, or this one (read whole into scratch first), has read
            halves = bits.view(np.uint16)
            scratch = self._scratch[0]
            width = scratch.shape[0]
            for lo in range(0, bits.size, width):
                hi = min(lo + width, bits.size)
                _narrow_chunk_in_place(bits[lo:hi], halves[lo:hi], scratch[: hi - lo], clamp)
        exact: Array = bits.view(np.uint16)[: bits.size].view(np.float16)
        self.exact = exact.reshape(self.shadow.shape)
        return self.exact

    def _value(self, magnitude: int) -> float:
        return float(np.uint16(magnitude).view(np.float16))

    def _narrow_dividing(self, kernels: half_kernel.Kernels) -> Callable[[Array, Array, Any], None]:
        loop, clamp = kernels.narrow_half_dividing, self._past_largest()
        return lambda bits, out, divisor: loop(bits, out, clamp, divisor)

    def _check_overflow(self) -> None:
        bits = self.shadow.reshape(-1).view(np.uint32)

        def chunk(lo: int, hi: int, scratch: Array) -> int:
            np.bitwise_and(bits[lo:hi], np.uint32(0x7FFFFFFF), out=scratch)
            return int(np.maximum.reduce(scratch))

        magnitude = max(self._split(chunk))
        if magnitude >= _HALF_INF:
            # rounded past the largest half: infinities from here on
            self._narrow_in_place()
        else:
            self._bound = self._value(magnitude >> 13)

    def _widen(self, gradient: Array, out: Array) -> None:
        bits = out.view(np.uint32)
        np.copyto(bits.view(np.int32), gradient.view(np.int16), casting="unsafe")  # sign-extends
        np.left_shift(bits, 13, out=bits)
        np.bitwise_and(bits, _HALF_SIGN_FIX, out=bits)

    def _add_chunk(self, shadow: Array, gradient: Array, scratch: Array) -> None:
        self._widen(gradient, scratch)
        np.add(shadow, scratch.view(np.float32), out=shadow)
        _round_bits(shadow.view(np.uint32), scratch, 13, _HALF_KEEP, _HALF_HALFWAY)

    def _narrow(self) -> Array:
        """The sum as float16: in chunks, allocating only the result."""
        out = np.empty(self.shadow.shape, np.uint16)
        flat_out = out.reshape(-1)
        bits = self.shadow.reshape(-1).view(np.uint32)
        clamp = self._past_largest()  # a sum past the largest half is an infinity

        def chunk(lo: int, hi: int, scratch: Array) -> None:
            part = flat_out[lo:hi]
            np.right_shift(bits[lo:hi], 13, out=scratch)  # the sign lands on bit 18
            np.bitwise_and(scratch, np.uint32(0x3FFFF), out=scratch)
            if clamp:
                np.minimum(scratch, np.uint32(0x7C00), out=scratch)
            np.copyto(part, scratch, casting="unsafe")
            np.right_shift(bits[lo:hi], 16, out=scratch)
            np.bitwise_and(scratch, np.uint32(0x8000), out=scratch)
            np.bitwise_or(part, scratch, out=part, casting="unsafe")

        self._split(chunk)
        half: Array = out.view(np.float16)
        return half


# the uint16 holding a uint32's low half
_LOW_HALF = 0 if sys.byteorder == "little" else 1


def _narrow_chunk_in_place(bits: Array, halves: Array, scratch: Array, clamp: bool) -> None:
    """HalfSum._narrow's work on a chunk of the scaled float32 images ``bits``,
    into ``halves`` (uint16), which lie over memory ``bits`` or earlier chunks'
    images had. Nothing is allocated: every operation stays in uint32 (numpy
    buffers a cast), and ``bits``, once read into ``scratch``, holds the signs."""
    np.right_shift(bits, 13, out=scratch)  # the sign lands on bit 18
    sign = bits  # read whole: its memory is free
    np.right_shift(scratch, 3, out=sign)
    np.bitwise_and(sign, np.uint32(0x8000), out=sign)
    np.bitwise_and(scratch, np.uint32(0x3FFFF), out=scratch)
    if clamp:
        np.minimum(scratch, np.uint32(0x7C00), out=scratch)
    np.bitwise_or(scratch, sign, out=scratch)
    np.copyto(halves, scratch.view(np.uint16)[_LOW_HALF::2])


class BFloat16Sum(_NarrowSum):
    """bfloat16. The image of a bfloat16 is its float32 value (its bits << 16),
    and float32 has the same exponent range, so overflow rounds to infinity on
    its own; only NaNs (whose payloads ml_dtypes makes canonical, and whose
    choice between two NaN operands is the compiler's) are left to ml_dtypes."""

    __slots__ = ()
    _LARGEST_FINITE = 0x7F7F

    def _value(self, magnitude: int) -> float:
        return 0.0  # no bound needed

    def _narrow_dividing(self, kernels: half_kernel.Kernels) -> Callable[[Array, Array, Any], None]:
        loop: Callable[[Array, Array, Any], None] = kernels.narrow_bfloat16_dividing
        return loop  # the shadow holds no NaN: one turns the round to ml_dtypes'

    def add(self, gradient: Array) -> None:
        # No scan first: infinities add in float32 as they do in bfloat16, and a
        # NaN (from the gradient, or infinities of opposite signs) shows in each
        # chunk's maximum (or the compiled loop's answer). Rounding leaves NaNs
        # NaNs (their low 16 bits are zero); ml_dtypes returns them canonical,
        # keeping the sign. The round then continues with ml_dtypes'
        # arithmetic, where NaN meets NaN.
        if self.exact is not None:
            _add_quietly(self.exact, gradient)
            return
        flat_gradient = _flat(gradient)
        kernels = self._kernels_for(flat_gradient)
        found_nan = self._add_all(flat_gradient, None if kernels is None else kernels.add_bfloat16)
        if any(found_nan):
            flat = self.shadow.reshape(-1)
            bits = flat.view(np.uint32)
            nan = np.isnan(flat)
            bits[nan] = (bits[nan] & np.uint32(0x80000000)) | np.uint32(0x7FC00000)
            self.exact = self._narrow()

    def _widen(self, gradient: Array, out: Array) -> None:
        np.copyto(out.view(np.float32), gradient, casting="unsafe")  # ml_dtypes: a vector shift

    def _add_chunk(self, shadow: Array, gradient: Array, scratch: Array) -> Any:
        widened = scratch.view(np.float32)
        self._widen(gradient, widened)
        with quiet_float_errors():
            np.add(shadow, widened, out=shadow)
        _round_bits(shadow.view(np.uint32), scratch, 16, _BF16_KEEP, _BF16_HALFWAY)
        largest = np.maximum.reduce(shadow)  # NaN when one is there
        return largest != largest

    def _narrow(self) -> Array:
        """The sum as bfloat16 (the top half of each float32): allocates only the result."""
        out = np.empty(self.shadow.shape, np.uint16)
        flat_out = out.reshape(-1)
        bits = self.shadow.reshape(-1).view(np.uint32)
        self._split(
            lambda lo, hi, scratch: np.right_shift(
                bits[lo:hi], 16, out=flat_out[lo:hi], casting="unsafe"
            )
        )
        narrow: Array = out.view(ml_dtypes.bfloat16)
        return narrow


# Below this many elements numpy's own narrow loops cost less than the passes.
NARROW_MIN_ELEMENTS = 4096

NarrowSum = HalfSum | BFloat16Sum
RoundSum = Array | NarrowSum


def start_sum(first: Array, dtype: np.dtype[Any], owned: bool = False) -> RoundSum:
    """A running sum of ``dtype`` whose first term is ``first`` (copied): an
    ndarray, or for float16/bfloat16 a NarrowSum (a float32 sum rounded per add).
    An ``owned`` ``first`` (a new array no one else holds) that is already a
    C-ordered, writable array of ``dtype`` becomes the sum itself."""
    if first.size == 1:
        return _single(first, dtype)
    if first.size >= NARROW_MIN_ELEMENTS:
        if dtype == np.float16:
            return HalfSum(first, dtype)
        if dtype == ml_dtypes.bfloat16:
            return BFloat16Sum(first, dtype)
    if owned and first.dtype == dtype and first.flags.c_contiguous and first.flags.writeable:
        return first
    return parallel_copy(first, dtype)


def _single(first: Array, dtype: np.dtype[Any]) -> Array:
    """A one-element running sum: a view of a two-element buffer.

    numpy copies an operand before adding in place when the output is a
    one-element array that is also an input (its overlap check gives up on
    them): 0.7 us where the add itself costs 0.2 us. Adding the gradient as a
    0-d array into the two-element buffer (:func:`_add_single`) avoids it; the
    second element is scratch, never read.
    """
    total: Array = np.empty(2, dtype)[:1].reshape(first.shape)
    np.copyto(total, first, casting="unsafe")
    return total


def _add_single(total: Array, gradient: Array) -> None:
    """``total += gradient`` for a one-element sum made by :func:`_single`."""
    pair: Any = total.base
    np.add(pair, gradient.reshape(()), pair)


def _add_small(total: Array, gradient: Array) -> None:
    """``total += gradient`` on the calling thread, for a sum below the threads' size."""
    if total.size == 1:
        _add_single(total, gradient)
    else:
        np.add(total, gradient, total)


def sum_adder(dtype: np.dtype[Any]) -> Callable[[Any, Array], None]:
    """``adder(total, gradient)`` adds ``gradient`` into a running sum of ``dtype``
    made by :func:`start_sum`, whatever its size."""
    limit = PARALLEL_MIN_ELEMENTS

    def add_large(total: Any, gradient: Array) -> None:
        if type(total) is np.ndarray:
            add_in_place(total, gradient)
        else:
            total.add(gradient)

    if dtype.kind in "iu":

        def add_integers(total: Any, gradient: Array) -> None:
            if type(total) is np.ndarray and total.size < limit:
                _add_small(total, gradient)
            else:
                add_large(total, gradient)

        return add_integers
    if _QUIET is None:  # numpy < 2

        def add_floats(total: Any, gradient: Array) -> None:
            if type(total) is np.ndarray and total.size < limit:
                with np.errstate(all="ignore"):
                    _add_small(total, gradient)
            else:
                add_large(total, gradient)

        return add_floats
    quiet, set_state, reset_state = _QUIET, _QUIET[0].set, _QUIET[0].reset

    def add_floats_quietly(total: Any, gradient: Array) -> None:
        # _add_small written out: this is most of a 1-element apply's own time
        if type(total) is np.ndarray and total.size < limit:
            token = set_state(quiet[1])
            try:
                if total.size == 1:
                    pair: Any = total.base  # see _single
                    np.add(pair, gradient.reshape(()), pair)
                else:
                    np.add(total, gradient, total)
            finally:
                reset_state(token)
        else:
            add_large(total, gradient)

    return add_floats_quietly


def divided_sum(total: RoundSum, count: int) -> Array | None:
    """The running sum ``total`` divided by ``count`` in its dtype, in a new
    array, when one compiled pass can make it (a float16 or bfloat16 sum, see
    _NarrowSum.divided); else None, and the caller divides the result."""
    return total.divided(count) if isinstance(total, _NarrowSum) else None


def sum_result(total: RoundSum) -> Array:
    """The running sum ``total`` as an array of its dtype (the buffer itself when it is one)."""
    return total.result() if isinstance(total, _NarrowSum) else total
