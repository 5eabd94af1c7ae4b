"""The compiled float16/bfloat16 loops (tf_accum/accumulators/half_kernel.py)
give the bits of the numpy path they replace, and are optional.

The side-by-side tests run one round twice, with the compiled loops and with
numpy only, and compare the bits after every add (and with numpy's own narrow
arithmetic). They need numba (the ``fast`` extra) and skip without it; the
fallback tests run either way.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tf_accum as tfa
from tests import background
from tests.helpers import (
    WAIT,
    Background,
    Spy,
    assert_answers_while_compiling,
    fresh_kernels,
    in_forked_child,
    kernels_in_use,
    loaded_on_a_thread,
)
from tests.test_fast_paths import HALF_EDGES, NARROW, narrow_bits, simple_sum, small_thresholds
from tf_accum.accumulators import half_kernel, narrow_sum, running_sum
from tf_accum.accumulators.narrow_sum import BFloat16Sum, HalfSum

Array = np.ndarray[Any, Any]
HAS_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAS_NUMBA, reason="numba (the fast extra) is not installed")
raw = tfa.raw_ops


def compiled() -> half_kernel.Kernels:
    kernels = half_kernel.load()
    assert kernels is not None, "numba is installed but the loops did not compile"
    return kernels


@contextlib.contextmanager
def kernels_from(min_elements: int) -> Iterator[None]:
    """Sums of at least ``min_elements`` load the compiled loops."""
    with small_thresholds(), mock.patch.object(half_kernel, "MIN_ELEMENTS", min_elements):
        yield


def loops_missing() -> Any:
    """As if numba were missing, at the production chunk sizes."""
    return kernels_in_use(half_kernel, None)


@contextlib.contextmanager
def numpy_only() -> Iterator[None]:
    """As if numba were missing: every sum on the numpy path (small chunks)."""
    with small_thresholds(), loops_missing():
        yield


def fresh_loader() -> Any:
    """half_kernel as if nothing had been loaded yet (restored afterwards)."""
    return fresh_kernels(half_kernel)


LAYOUTS = ["contiguous", "read-only", "strided", "transposed", "unaligned"]


def laid_out(bits: Array, shape: tuple[int, ...], np_dtype: Any, layout: str) -> Array:
    """The narrow values ``bits`` (flat, uint16) as an array of ``shape`` in ``layout``."""
    values: Array = bits.view(np_dtype)
    out: Array
    if layout == "contiguous":
        out = values.reshape(shape)
    elif layout == "read-only":
        out = values.reshape(shape).copy()
        out.flags.writeable = False
    elif layout == "strided":  # every other element of a longer array
        longer: Array = np.zeros(values.size * 2, np_dtype)
        longer[::2] = values
        out = longer[::2].reshape(shape)
    elif layout == "transposed":
        out = values.reshape(shape[::-1]).T
    else:
        assert layout == "unaligned"
        raw = bytes(1) + values.tobytes()
        out = np.frombuffer(raw, np_dtype, count=values.size, offset=1).reshape(shape)
    return out


# a round's gradients: (flavour of values, layout) each
TERMS = st.lists(
    st.tuples(
        st.sampled_from(["any bits", "edges", "ordinary", "large", "tiny"]),
        st.sampled_from(LAYOUTS),
    ),
    min_size=1,
    max_size=6,
)


def gradients_of(
    kind: str, shape: tuple[int, ...], terms: list[tuple[str, str]], seed: int
) -> list[Array]:
    """One gradient of ``shape`` per (flavour, layout) of ``terms``."""
    size = int(np.prod(shape))
    np_dtype = NARROW[kind][1]
    return [
        laid_out(narrow_bits(kind, size, seed + i, mode), shape, np_dtype, layout)
        for i, (mode, layout) in enumerate(terms)
    ]


def round_bits(gradients: list[Array], np_dtype: Any, loops: bool) -> list[Array]:
    """The running sum's bits after each gradient, with the compiled loops or without."""
    with kernels_from(1) if loops else numpy_only():
        total = running_sum.start_sum(gradients[0], np.dtype(np_dtype))
        assert isinstance(total, HalfSum | BFloat16Sum)
        assert (total._kernels is not None) == loops
        add = running_sum.sum_adder(np.dtype(np_dtype))
        seen = [running_sum.sum_result(total).view(np.uint16).copy()]
        for gradient in gradients[1:]:
            add(total, gradient)
            seen.append(running_sum.sum_result(total).view(np.uint16).copy())
    return seen


@needs_numba
@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(sorted(NARROW)),
    shape=st.sampled_from([(8,), (9,), (10,), (11,), (17,), (64,), (3, 5), (4, 16), (1000,)]),
    terms=TERMS,
    seed=st.integers(0, 2**32 - 1),
)
def test_compiled_and_numpy_rounds_give_the_same_bits(kind, shape, terms, seed) -> None:
    compiled()
    np_dtype = NARROW[kind][1]
    gradients = gradients_of(kind, shape, terms, seed)
    with_loops = round_bits(gradients, np_dtype, loops=True)
    without = round_bits(gradients, np_dtype, loops=False)
    for step, (fast, slow) in enumerate(zip(with_loops, without, strict=True)):
        np.testing.assert_array_equal(fast, slow, err_msg=f"after gradient {step}")
        reference = simple_sum(gradients[: step + 1]).view(np.uint16)
        np.testing.assert_array_equal(fast.reshape(-1), reference.reshape(-1))


@needs_numba
@pytest.mark.parametrize("block", [3, half_kernel.BLOCK])
@pytest.mark.parametrize("special", [0x7C00, 0xFC00, 0x7E01])
def test_a_float16_gradient_stopped_midway_by_an_infinity_adds_as_numpy_does(
    block: int, special: int
) -> None:
    """The compiled loop scans and adds a block at a time and stops before a
    block holding an infinity or NaN; numpy adds the rest. An infinity or NaN
    just before, at, and just after each block edge, in a round whose sums are near the largest half (the bound counts the
    blocks the loop added), gives the bits of the numpy path."""
    compiled()
    size = 4 * block + 5  # several blocks
    edges = {0, 1, block - 1, block, block + 1, 2 * block, size - 1}
    rng = np.random.default_rng(block)
    for position in sorted(p for p in edges if 0 <= p < size):
        gradients = []
        for i in range(4):
            values = rng.uniform(-3e4, 3e4, size).astype(np.float16).view(np.uint16)
            if i == 2:
                values[position] = special
            gradients.append(values.view(np.float16))
        with mock.patch.object(half_kernel, "BLOCK", block):
            with_loops = round_bits(gradients, np.float16, loops=True)
        without = round_bits(gradients, np.float16, loops=False)
        for step, (fast, slow) in enumerate(zip(with_loops, without, strict=True)):
            np.testing.assert_array_equal(fast, slow, err_msg=f"{position=}, {step=}")
            reference = simple_sum(gradients[: step + 1]).view(np.uint16)
            np.testing.assert_array_equal(fast, reference, err_msg=f"{position=}, {step=}")


@needs_numba
@pytest.mark.parametrize("kind", sorted(NARROW))
def test_only_a_large_round_loads_the_loops_then_every_round_uses_them(kind: str) -> None:
    kernels = compiled()
    compile_ = mock.Mock(return_value=kernels)

    def start(size: int) -> Any:
        np_dtype = NARROW[kind][1]
        total = running_sum.start_sum(np.ones(size, np_dtype), np.dtype(np_dtype))
        assert isinstance(total, HalfSum | BFloat16Sum)
        return total._kernels

    with fresh_loader(), kernels_from(10), mock.patch.object(half_kernel, "_compile", compile_):
        assert start(9) is None and compile_.call_count == 0
        assert start(10) is kernels and compile_.call_count == 1
        assert start(9) is kernels and start(11) is kernels
    assert compile_.call_count == 1


@needs_numba
@pytest.mark.parametrize("kind", sorted(NARROW))
@pytest.mark.parametrize(
    "layout, compiled_add",
    [("contiguous", True), ("read-only", True), ("transposed", True),
     ("strided", False), ("unaligned", False)],
)  # fmt: skip
def test_which_gradients_take_the_loops(kind: str, layout: str, compiled_add: bool) -> None:
    np_dtype = NARROW[kind][1]
    spy = Spy(compiled())
    bits = narrow_bits(kind, 40, 3, "ordinary")
    with kernels_from(1), mock.patch.object(half_kernel, "load", return_value=spy.kernels):
        total = running_sum.start_sum(np.zeros((5, 8), np_dtype), np.dtype(np_dtype))
        spy.calls.clear()
        running_sum.sum_adder(np.dtype(np_dtype))(total, laid_out(bits, (5, 8), np_dtype, layout))
        got = running_sum.sum_result(total)
    add = "add_half_checked" if kind == "float16" else "add_bfloat16"
    assert (add in spy.calls) == compiled_add
    # one call for the whole gradient, not one per chunk
    assert spy.calls.count(add) == (1 if compiled_add else 0)
    assert (
        got.view(np.uint16).reshape(-1).tolist()
        == (bits.reshape((8, 5)).T.reshape(-1) if layout == "transposed" else bits).tolist()
    )


def finite_half_bits() -> Array:
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    return every[(every & 0x7FFF) <= 0x7BFF]


@needs_numba
def test_half_add_matches_numpy_for_every_finite_gradient() -> None:
    """Every finite half as a gradient, against shadows holding edges, random
    halves and large ones (whose sums pass the largest half)."""
    kernels = compiled()
    numpy_sum = HalfSum(np.zeros(4, np.float16), np.dtype(np.float16))
    gradients = finite_half_bits()
    rng = np.random.default_rng(11)
    edges = np.array([b for b in HALF_EDGES if (b & 0x7FFF) <= 0x7BFF], np.uint16)
    for trial in range(12):
        shadow_halves = (
            rng.choice(edges, gradients.size) if trial < 3 else rng.permutation(gradients)
        )
        shadow = np.empty(gradients.size, np.float32)
        numpy_sum._widen(shadow_halves.view(np.float16), shadow)
        fast, slow = shadow.view(np.uint32).copy(), shadow.view(np.uint32).copy()
        order = rng.permutation(gradients)
        largest = int(np.max(order & 0x7FFF))
        assert kernels.add_half_checked(fast, order, half_kernel.BLOCK) == (largest, order.size)
        numpy_sum._add_chunk(
            slow.view(np.float32), order.view(np.float16), np.empty(order.size, np.uint32)
        )
        np.testing.assert_array_equal(fast, slow)


@needs_numba
def test_bfloat16_add_matches_numpy_for_every_pattern() -> None:
    """Every bfloat16 pattern (infinities and NaNs too) as a gradient, against
    shadows of every pattern but NaNs in random pairings; the NaN answer is
    numpy's. A round's shadow never holds a NaN (the round goes on in
    ml_dtypes' arithmetic once one shows), and it had better not: which NaN
    operand's payload a float add returns is up to the compiler."""
    kernels = compiled()
    numpy_sum = BFloat16Sum(np.zeros(4, ml_dtypes.bfloat16), np.dtype(ml_dtypes.bfloat16))
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    not_nan = every[(every & 0x7FFF) <= 0x7F80].astype(np.uint32) << 16
    rng = np.random.default_rng(12)
    for _ in range(8):
        shadow = rng.choice(not_nan, every.size)
        fast, slow = shadow.copy(), shadow.copy()
        order = rng.permutation(every)
        for lo, hi in ((0, 5), (5, 2**16)):  # a NaN-free piece and the rest
            part = order[lo:hi]
            nan = kernels.add_bfloat16(fast[lo:hi], part)
            top = numpy_sum._add_chunk(
                slow[lo:hi].view(np.float32),
                part.view(ml_dtypes.bfloat16),
                np.empty(part.size, np.uint32),
            )
            assert nan == bool(top)
        np.testing.assert_array_equal(fast, slow)
    # infinities, given or by overflow, are no NaN; opposite ones make one
    inf, largest, one = 0x7F800000, 0x7F7F0000, 0x3F800000
    shadow = np.array([one, largest, inf, inf], np.uint32)
    gradient = np.array([0x7F80, 0x7F7F, 0x3F80, 0x7F80], np.uint16)
    assert kernels.add_bfloat16(shadow, gradient) is False
    assert shadow.tolist() == [inf] * 4
    assert kernels.add_bfloat16(shadow[:2], np.array([0x3F80, 0xFF80], np.uint16)) is True


@needs_numba
def test_largest_magnitude_of_every_pattern() -> None:
    kernels = compiled()
    every = (
        np.random.default_rng(13).permutation(np.arange(2**16, dtype=np.uint32)).astype(np.uint16)
    )
    for piece in (every, every[:1], every[:0], every[every & 0x7FFF < 0x7C00]):
        expected = int((piece & 0x7FFF).max()) if piece.size else 0
        assert kernels.largest_magnitude(piece) == expected


def images_to_narrow(clamp: bool) -> Array:
    """Every finite half's image (and, when clamping, images of sums past the
    largest half), in random order, as float32 bits."""
    images = HalfSum(np.zeros(4, np.float16), np.dtype(np.float16))
    shadow = np.empty(finite_half_bits().size, np.float32)
    images._widen(
        np.random.default_rng(14).permutation(finite_half_bits()).view(np.float16), shadow
    )
    bits = shadow.view(np.uint32)
    if clamp:  # sums rounded past the largest half: 65520, 131008, the largest image
        bits[::997] = np.array([0x7C00 << 13, 0x7FFF << 13, 0x7FFFE000], np.uint32)[
            np.arange(bits[::997].size) % 3
        ] | (bits[::997] & 0x80000000)
    return bits


def narrowed_into_new_memory(bits: Array, clamp: bool) -> Array:
    """HalfSum._narrow's half bit patterns of the images ``bits`` (left as they are)."""
    expected = HalfSum(np.zeros(bits.size, np.float16), np.dtype(np.float16))
    expected.shadow = bits.view(np.float32).copy()
    expected._bound = 65504.0 if clamp else 0.0
    narrowed: Array = expected._narrow().view(np.uint16)
    return narrowed


@pytest.mark.parametrize("clamp", [False, True])
@pytest.mark.parametrize("width", [1, 7, 4096])
def test_numpy_narrowing_in_place_gives_the_narrowing_into_new_memory(
    clamp: bool, width: int
) -> None:
    """Without the loops, numpy narrows over the shadow's own memory chunk
    after chunk (of ``width`` elements, so over many chunk edges): the bits of
    the narrowing into new memory."""
    bits = images_to_narrow(clamp)
    want = narrowed_into_new_memory(bits, clamp)
    with numpy_only():
        total = HalfSum(np.zeros(bits.size, np.float16), np.dtype(np.float16))
    assert total._kernels is None
    total.shadow = bits.view(np.float32)
    total._bound = 65504.0 if clamp else 0.0
    total._scratch = np.empty(width, np.uint32)
    exact = total._narrow_in_place()
    assert np.shares_memory(exact, bits)
    np.testing.assert_array_equal(exact.view(np.uint16), want)


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
def test_a_numpy_sum_rounding_past_the_largest_half_allocates_nothing() -> None:
    """Without the loops too, the check that finds a sum rounded past the
    largest half after a whole add goes on in float16 without a new buffer
    (which could fail with the gradient added but not counted)."""
    import tracemalloc

    size = 1 << 16
    with loops_missing():  # not numpy_only(): its small chunks' bookkeeping allocates
        total = running_sum.start_sum(np.full(size, 60000, np.float16), np.dtype(np.float16))
        assert isinstance(total, HalfSum) and total._kernels is None
        gradient = np.full(size, 1.0, np.float16)
        gradient[::3] = 6000  # 66000 rounds to infinity
        # the add, then the check apart, measured alone
        with mock.patch.object(HalfSum, "_check_overflow", lambda self: None):
            running_sum.sum_adder(np.dtype(np.float16))(total, gradient)
        assert total.exact is None and total._past_largest()
        tracemalloc.start()
        try:
            total._check_overflow()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert total.exact is not None  # it goes on in float16
        got = running_sum.sum_result(total).view(np.uint16)
    assert peak < size // 4, f"{peak} bytes allocated by the check of {size} halves"
    with np.errstate(over="ignore"):
        expected = np.full(size, 60000, np.float16) + gradient
    np.testing.assert_array_equal(got, expected.view(np.uint16))


@needs_numba
@pytest.mark.parametrize("clamp", [False, True])
def test_narrowing_in_place_gives_the_numpy_narrowing(clamp: bool) -> None:
    """Every finite half's image (and, when clamping, images of sums past the
    largest half), narrowed over the shadow's own memory, in random order."""
    kernels = compiled()
    bits = images_to_narrow(clamp)
    want = narrowed_into_new_memory(bits, clamp)
    kernels.narrow_half_into(bits, bits.view(np.uint16), clamp)
    np.testing.assert_array_equal(bits.view(np.uint16)[: bits.size], want)


# Counts as a MEAN take converts them to its dtype: small ones, odd ones, powers
# of two, either side of 2**13 (where a division's subnormal quotients could
# round twice if done on the images), the largest half and past it (infinite).
COUNTS = [*range(1, 41), 3**7, 4095, 8191, 8192, 8193, 32768, 65504, 65519, 65520, 2**20]


def numpy_quotients(bits: Array, np_dtype: Any, count: int) -> Array:
    with np.errstate(all="ignore"):
        quotient: Array = np.divide(bits.view(np_dtype), np.asarray(count).astype(np_dtype))
    return quotient.view(np.uint16)


def divisor_of(np_dtype: Any, count: int) -> np.float32:
    """The count as a MEAN take converts it (infinite past float16's range), as float32."""
    with np.errstate(all="ignore"):
        narrow = np.asarray(count).astype(np_dtype)
    wide: np.float32 = np.float32(narrow)
    return wide


@needs_numba
@pytest.mark.parametrize("kind", sorted(NARROW))
def test_division_of_every_pattern_matches_numpy(kind: str) -> None:
    """Every float16 or bfloat16 pattern (NaNs with payloads, infinities,
    subnormals, signed zeros) divided by each count: the bits of numpy's
    float16 division and of ml_dtypes' bfloat16 division."""
    kernels = compiled()
    np_dtype = NARROW[kind][1]
    loop = kernels.divide_half if kind == "float16" else kernels.divide_bfloat16
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    for count in COUNTS:
        got = every.copy()
        loop(got, divisor_of(np_dtype, count))
        np.testing.assert_array_equal(got, numpy_quotients(every, np_dtype, count), f"{count}")


@pytest.mark.parametrize("kind", sorted(NARROW))
def test_the_division_loops_uncompiled_give_the_same_bits(kind: str) -> None:
    """The loops' Python source, run as it is (numba or not), on edges and a
    sample of patterns: what numba compiles means what numpy computes."""
    np_dtype = NARROW[kind][1]
    loop = half_kernel.divide_half if kind == "float16" else half_kernel.divide_bfloat16
    sample = narrow_bits(kind, 600, 21, "any bits")
    sample[:17] = narrow_bits(kind, 17, 22, "edges")
    for count in (1, 3, 8, 8193, 65519, 65520):
        got = sample.copy()
        with np.errstate(all="ignore"):
            loop(got, divisor_of(np_dtype, count))
        np.testing.assert_array_equal(got, numpy_quotients(sample, np_dtype, count), f"{count}")


@needs_numba
@pytest.mark.parametrize("clamp", [False, True])
def test_narrowing_and_dividing_gives_the_narrowing_then_numpys_division(clamp: bool) -> None:
    """A MEAN take's one pass over a float16 shadow: every finite half's image
    (and, when clamping, sums past the largest half), narrowed and divided."""
    kernels = compiled()
    bits = images_to_narrow(clamp)
    narrowed = narrowed_into_new_memory(bits, clamp)
    for count in (1, 3, 4, 7, 8193, 65520):
        out = np.empty(bits.size, np.uint16)
        kernels.narrow_half_dividing(bits, out, clamp, divisor_of(np.float16, count))
        np.testing.assert_array_equal(out, numpy_quotients(narrowed, np.float16, count))


@needs_numba
def test_bfloat16_dividing_from_the_shadow_gives_ml_dtypes_division() -> None:
    """Every bfloat16 but NaNs (which never stay in a shadow) as float32 bits."""
    kernels = compiled()
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    not_nan = every[(every & 0x7FFF) <= 0x7F80]
    shadow = not_nan.astype(np.uint32) << 16
    for count in (1, 3, 4, 7, 8193, 2**20):
        out = np.empty(shadow.size, np.uint16)
        kernels.narrow_bfloat16_dividing(shadow, out, divisor_of(ml_dtypes.bfloat16, count))
        expected = numpy_quotients(not_nan, ml_dtypes.bfloat16, count)
        np.testing.assert_array_equal(out, expected)


@needs_numba
@settings(max_examples=100, deadline=None)
@given(
    kind=st.sampled_from(sorted(NARROW)),
    shape=st.sampled_from([(8,), (9,), (17,), (1000,), (3, 5), (4, 16), (2, 3, 7)]),
    terms=TERMS,
    seed=st.integers(0, 2**32 - 1),
)
def test_a_mean_take_with_the_loops_gives_numpys_bits(kind, shape, terms, seed) -> None:
    """A MEAN take of a round in the shadow divides in the loops' one pass;
    one that went on in numpy's
    narrow arithmetic (a NaN or infinity came) divides there: numpy's bits,
    in the take's shape, whatever the gradients' layouts."""
    compiled()
    dtype, np_dtype = NARROW[kind]
    gradients = gradients_of(kind, shape, terms, seed)
    passes: list[tuple[bool, bool]] = []  # (in the shadow, divided in one pass)
    divided = narrow_sum.NarrowSum.divided

    def spy(self: Any, count: int) -> Any:
        in_shadow = self.exact is None
        result = divided(self, count)
        passes.append((in_shadow, result is not None))
        return result

    with (
        kernels_from(1),
        mock.patch.object(narrow_sum.NarrowSum, "divided", spy),
    ):
        taken = mean_take(dtype, shape, gradients)
    expected = numpy_quotients(simple_sum(gradients).view(np.uint16), np_dtype, len(gradients))
    assert taken.dtype == np_dtype and taken.shape == shape
    np.testing.assert_array_equal(taken.view(np.uint16), expected)
    if passes:  # a round of one gradient, or one kept in numpy's arithmetic, is no narrow sum
        assert len(passes) == 1 and passes[0][0] == passes[0][1]


def mean_take(dtype: Any, shape: tuple[int, ...], gradients: list[Array]) -> Array:
    h = raw.ConditionalAccumulator(dtype=dtype, shape=list(shape))
    for gradient in gradients:
        raw.AccumulatorApplyGradient(handle=h, local_step=0, gradient=gradient)
    taken: Array = raw.AccumulatorTakeGradient(handle=h, num_required=1, dtype=dtype)
    return taken


@needs_numba
@pytest.mark.parametrize(
    ("kind", "count"),
    [("bfloat16", 257), ("bfloat16", 3), ("float16", 3), ("float16", 65520)],
)
@pytest.mark.parametrize("in_shadow", [True, False])
def test_a_mean_take_with_the_loops_divides_by_the_count_in_the_dtype(
    kind: str, count: int, in_shadow: bool
) -> None:
    """257 is 256 in bfloat16, 65520 infinite in float16: the loops divide by
    the count converted to the dtype (as numpy does), whether the round is in
    its float32 sum or went on in numpy's arithmetic (an infinity came first)."""
    compiled()
    dtype, np_dtype = NARROW[kind]
    first = np.array([[1.5, -3, 0.25, 5], [7, 2**-10, -0.0, 1e-3], [9, 8, 7, 6]], np_dtype)
    if not in_shadow:
        first[1, 2] = np.inf
    later = np.array([[1, 2, 3, 4], [-1, 0.5, 0.125, 3], [-2, -1, 0, 1]], np_dtype)
    gradients = [first] + [later] * (count - 1)
    seen: list[bool] = []  # whether the round was in its float32 sum at the take
    divided = narrow_sum.NarrowSum.divided
    with (
        mock.patch.object(running_sum, "NARROW_MIN_ELEMENTS", 8),  # 12 elements: a narrow sum
        mock.patch.object(
            narrow_sum.NarrowSum,
            "divided",
            lambda self, n: (seen.append(self.exact is None), divided(self, n))[1],
        ),
    ):
        taken = mean_take(dtype, (3, 4), gradients)
    assert seen == [in_shadow]
    with np.errstate(all="ignore"):
        total = np.array(first, copy=True)
        for _ in range(count - 1):
            np.add(total, later, out=total)  # numpy's own narrow adds: the reference
    np.testing.assert_array_equal(
        taken.view(np.uint16), numpy_quotients(total.view(np.uint16), np_dtype, count)
    )


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
@needs_numba
def test_a_gradient_stopped_midway_allocates_nothing() -> None:
    """Once the loop has added a block, the round goes on without allocating
    a buffer (so none can fail with part of the gradient added); the result
    taken is an array of its own, not a view of the larger shadow."""
    import tracemalloc

    size = 1 << 16
    gradient = np.ones(size, np.float16)
    gradient[size - 10] = np.inf  # in the last block of the second part
    with kernels_from(1):
        total = running_sum.start_sum(np.ones(size, np.float16), np.dtype(np.float16))
        assert isinstance(total, HalfSum)
        add = running_sum.sum_adder(np.dtype(np.float16))
        tracemalloc.start()
        try:
            add(total, gradient)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        result = running_sum.sum_result(total)
        got = result.view(np.uint16)
    assert peak < size // 4, f"{peak} bytes allocated by an add of {size} halves"
    base = result if result.base is None else result.base
    assert base.nbytes == result.nbytes and not np.may_share_memory(result, total.shadow)
    expected = np.full(size, 2, np.float16)
    expected[size - 10] = np.inf
    np.testing.assert_array_equal(got, expected.view(np.uint16))


# --- optional, lazy, compiled once ---------------------------------------------


def large_round_without_loops(kind: str) -> None:
    np_dtype = NARROW[kind][1]
    gradients = [narrow_bits(kind, 64, seed, "ordinary").view(np_dtype) for seed in (1, 2, 3)]
    with kernels_from(1):
        total = running_sum.start_sum(gradients[0], np.dtype(np_dtype))
        assert isinstance(total, HalfSum | BFloat16Sum)
        assert total._kernels is None
        for gradient in gradients[1:]:
            running_sum.sum_adder(np.dtype(np_dtype))(total, gradient)
        got = running_sum.sum_result(total)
    np.testing.assert_array_equal(got.view(np.uint16), simple_sum(gradients).view(np.uint16))


@pytest.mark.parametrize("kind", sorted(NARROW))
def test_without_numba_numpy_does_the_sum(kind: str) -> None:
    with fresh_loader(), mock.patch.dict(sys.modules, {"numba": None}):  # import fails
        assert half_kernel.load() is None
        large_round_without_loops(kind)


def test_a_failed_compilation_falls_back_for_good() -> None:
    failing = mock.Mock(side_effect=RuntimeError("no compiler"))
    with fresh_loader(), mock.patch.object(half_kernel, "_compile", failing):
        assert half_kernel.load() is None
        assert half_kernel.load() is None
        large_round_without_loops("float16")
    assert failing.call_count == 1  # not retried per round


def test_threads_starting_at_once_compile_once() -> None:
    made: list[int] = []
    sentinel = half_kernel.Kernels(*[None] * len(half_kernel.Kernels._fields))

    def slow_compile() -> half_kernel.Kernels:
        made.append(threading.get_ident())
        time.sleep(0.05)
        return sentinel

    with fresh_loader(), mock.patch.object(half_kernel, "_compile", slow_compile):
        calls = [Background(half_kernel.load) for _ in range(8)]
        results = [call.result(WAIT) for call in calls]
    assert len(made) == 1
    assert all(result is sentinel for result in results)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_child_forked_while_the_loops_compile_uses_numpy() -> None:
    """The compiling thread is not in the child, and numba's own compiler lock
    stays held there: compiling again would wait forever."""
    compiling, finish = threading.Event(), threading.Event()
    compiles: list[int] = []

    def slow_compile() -> half_kernel.Kernels:
        compiles.append(os.getpid())
        compiling.set()
        assert finish.wait(WAIT)  # in the child: a compile that never ends
        raise RuntimeError("no compiler")

    with fresh_loader(), mock.patch.object(half_kernel, "_compile", slow_compile):
        first = Background(half_kernel.load)
        try:
            assert compiling.wait(WAIT)
            assert in_forked_child(lambda: loaded_on_a_thread(half_kernel.load)) == "None"
        finally:
            finish.set()
            first.result(WAIT)
    assert compiles == [os.getpid()]


_NUMBA_IMPORT_CODE = (
    "import sys, numpy as np, tf_accum as tfa\n"
    "from tf_accum.accumulators import half_kernel\n"
    "def round_of(size):\n"
    "    h = tfa.raw_ops.ConditionalAccumulator(dtype=tfa.float16, shape=[size])\n"
    "    for _ in range(2):\n"
    "        tfa.raw_ops.AccumulatorApplyGradient(handle=h, local_step=0,\n"
    "                                             gradient=np.ones(size, np.float16))\n"
    "    taken = tfa.raw_ops.AccumulatorTakeGradient(handle=h, num_required=2,\n"
    "                                                dtype=tfa.float16)\n"
    "    assert taken.dtype == np.float16 and bool((taken == 1).all())\n"
    "round_of(half_kernel.MIN_ELEMENTS - 1)\n"
    "assert 'numba' not in sys.modules\n"
    "round_of(half_kernel.MIN_ELEMENTS)\n"
    "print('numba' in sys.modules, half_kernel.load() is not None)\n"
)
# run beside the other tests (tests/background.py)
_NUMBA_IMPORT_JOB = background.define(
    "half kernel: numba imported only by a large round",
    [sys.executable, "-c", _NUMBA_IMPORT_CODE],
    timeout=120,
)


@pytest.mark.background(_NUMBA_IMPORT_JOB)
def test_numba_is_imported_only_by_a_large_narrow_round() -> None:
    done = background.result(_NUMBA_IMPORT_JOB)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(HAS_NUMBA)] * 2


def test_the_accumulator_answers_while_its_first_large_narrow_round_compiles() -> None:
    import tf_accum as tfa

    raw = tfa.raw_ops
    size = half_kernel.MIN_ELEMENTS
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float16, shape=[size])
    assert_answers_while_compiling(
        half_kernel,
        lambda: raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=np.ones(size, np.float16)
        ),
        lambda: raw.ResourceAccumulatorNumAccumulated(handle=h),
    )
    taken = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float16)
    assert taken.dtype == np.float16 and bool((taken == 1).all())
    raw.DestroyResourceOp(resource=h)
