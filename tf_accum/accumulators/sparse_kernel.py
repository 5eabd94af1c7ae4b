"""Compiled loops for the sparse accumulator's rows (optional: needs numba).

Why: adding a gradient's rows to the rows a round already holds is, in numpy,
a gather of the held rows into a temporary, the add, and a scatter back (plus
a gather and a scatter of their counts): three passes over the rows and a
temporary. One compiled loop adds each gradient row into its held row in
place and counts it, several times faster. A round with a slot map (see
sparse_round) takes two other loops instead: one finds a gradient's rows in
the map (all the map's entries first, so that their cache misses overlap),
gives the new rows their slots and merges them into the round's sorted
indices and slots, writing only its own outputs; the other adds the held
rows, sets the new ones (free slots) and writes the new rows' map entries,
in one pass: two loops in place of the numpy passes over the rows and the
index. A fourth loop gathers a MEAN take's rows into index order and
divides them on the way, in one pass, instead of a gather, then a gather,
division and scatter of the rows counted more than once.

The loop does the same single add per element as numpy (``held + gradient``,
in that order, in the rows' own dtype), so the bits are the same
(tests/test_sparse_kernel.py runs both side by side), except for the NaN a
sum of two NaNs gives: the processor returns one operand's, whichever the
compiler put first (numpy's own add may pick either, depending on the number
of rows), so it is a NaN either way but its sign or payload may differ. The
gather divides a row counted n times by n converted to the rows' dtype, as
numpy's path does (one division, same bits, NaNs included), and copies a row
counted once as it is. The loops cover float32 and float64 rows only
(C-contiguous, aligned); every other dtype or layout stays on numpy. They
allocate nothing, so, like the numpy path's final writes, they cannot fail
half-way for want of memory (the claiming loop's outputs are allocated by its
caller).

numba is imported, and the loop compiled, only by :func:`load`, before the
accumulator's lock, at the first sparse gradient of ``MIN_ELEMENTS`` or more
of a process (``import tf_accum`` never imports numba). If numba is missing,
or fails, :func:`load` returns None and numpy does the adds: same results.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tf_accum.accumulators.compiled_loader import Loader

Array = np.ndarray[Any, Any]

# The dtypes whose rows use the loop: numba adds them exactly as numpy does.
KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

# Gradients of this many elements load the loops (importing numba and
# compiling the loops are slow, once per process): from here an
# apply saves enough to repay that within thousands of applies
# (benchmarks/bench_sparse_kernel.py), as half_kernel's threshold does;
# smaller gradients would take many times as many. Smaller gradients use the
# loops only when a large one has loaded them (see :func:`loaded`): they are
# faster there too.
MIN_ELEMENTS = 262_144


# The loops are plain Python (they run uncompiled too, slowly); :func:`load`
# compiles them. ``rows`` is 2-D (one row per slot, flattened), ``hit`` is
# 2-D with one row per entry of ``slots``; the slots are distinct and valid.


def add_rows(
    rows: Array, counts: Array, slots: Array, hit: Array, stamp: Array, ticket: int
) -> None:
    """``rows[slots[j]] += hit[j]`` and ``counts[slots[j]] += 1`` for every j;
    then, its last store, ``stamp[0] = ticket``."""
    width = rows.shape[1]
    for j in range(slots.shape[0]):
        slot = slots[j]
        for i in range(width):
            rows[slot, i] = rows[slot, i] + hit[j, i]
        counts[slot] += 1
    # inside the one call: whoever sees the stamp knows the rows are written
    stamp[0] = ticket


def add_or_set_rows(
    rows: Array, counts: Array, slots: Array, hit: Array, fresh: Array,
    places: Array, new_index: Array, mark: int, stamp: Array, ticket: int,
) -> None:  # fmt: skip
    """As :func:`add_rows` (``stamp[0] = ticket`` last included), but the rows
    ``j`` where ``fresh[j]`` (free slots) are set to ``hit[j]`` and counted
    once; and each new row ``new_index[n]`` (from :func:`claim_rows`, whose
    checks make every index in them fall inside the map, in the order their
    slots were given) has its entry in the slot map ``places`` set to
    ``n + mark``."""
    width = rows.shape[1]
    # apart from the rows: independent stores, whose cache misses overlap
    for n in range(new_index.shape[0]):
        places[new_index[n]] = n + mark
    for j in range(slots.shape[0]):
        slot = slots[j]
        if fresh[j]:
            for i in range(width):
                rows[slot, i] = hit[j, i]
            counts[slot] = 1
        else:
            for i in range(width):
                rows[slot, i] = rows[slot, i] + hit[j, i]
            counts[slot] += 1
    stamp[0] = ticket


def claim_rows(
    places: Array, base: int, index: Array, used: int, held_index: Array, held_slot: Array,
    slots: Array, fresh: Array, new_index: Array, merged_index: Array, merged_slot: Array,
) -> int:  # fmt: skip
    """Find a gradient's rows through a round's slot map and give its new rows
    the free slots from ``used`` on, in index order.

    ``index``: the gradient's rows, sorted and distinct (k of them);
    ``held_index``: the round's, sorted, and ``held_slot`` the slot of each;
    ``places``: its map, ``slot + base + 1`` for its rows, ``base`` or less
    elsewhere. Writes ``slots[j]`` and ``fresh[j]`` for every row, the new
    rows' indices to the start of ``new_index`` (k entries; the n-th new row
    has slot ``used + n``) and the round's indices and slots with the new
    rows merged in to the start of ``merged_index`` and ``merged_slot``
    (``len(held_index) + k`` entries each). Returns the number of new rows,
    or -1 when an index falls outside the map. Changes nothing but its
    outputs, so an apply may still fail after it.
    """
    k = index.shape[0]
    size = places.shape[0]
    for j in range(k):
        # each index read once, here, and checked: the caller's array may be
        # changed by another thread meanwhile, and numba checks no bounds
        row = index[j]
        if row < 0 or row >= size:
            return -1
        new_index[j] = row
        # all the map's entries first: independent loads, whose cache misses overlap
        slots[j] = places[row]
    added = 0
    for j in range(k):
        row = new_index[j]  # added <= j: not overwritten yet
        entry = slots[j]
        if entry > base:
            slots[j] = entry - base - 1
            fresh[j] = False
        else:
            slots[j] = used + added
            fresh[j] = True
            new_index[added] = row
            added += 1
    if not added:
        return 0
    held = held_index.shape[0]
    at = 0
    new = 0
    out = 0
    while at < held and new < added:
        if new_index[new] < held_index[at]:
            merged_index[out] = new_index[new]
            merged_slot[out] = used + new
            new += 1
        else:
            merged_index[out] = held_index[at]
            merged_slot[out] = held_slot[at]
            at += 1
        out += 1
    # what is left of either run; loops: a slice assignment compiles for seconds
    for rest in range(at, held):
        merged_index[out] = held_index[rest]
        merged_slot[out] = held_slot[rest]
        out += 1
    for rest in range(new, added):
        merged_index[out] = new_index[rest]
        merged_slot[out] = used + rest
        out += 1
    return added


def gather_dividing(divisor_type: Any) -> Any:
    """The loop of a MEAN take, for rows whose dtype's scalar type is ``divisor_type``:
    ``out[j] = rows[order[j]] / counts[order[j]]``, the count converted to the
    rows' dtype (as numpy's path does), for rows counted more than once; the
    others are copied as they are. One pass over the rows instead of dividing
    them apart (a gather and a scatter of the rows counted several times),
    and the round's own rows are never changed."""

    def gather_rows_dividing(rows: Array, counts: Array, order: Array, out: Array) -> None:
        width = rows.shape[1]
        for j in range(order.shape[0]):
            slot = order[j]
            count = counts[slot]
            if count > 1:
                divisor = divisor_type(count)
                for i in range(width):
                    out[j, i] = rows[slot, i] / divisor
            else:
                for i in range(width):
                    out[j, i] = rows[slot, i]

    return gather_rows_dividing


class Kernels(NamedTuple):
    """The compiled loops (arguments: C-contiguous, aligned, 1-D but for the
    rows; ``slots``, ``order``, ``counts``, the indices, the merged arrays
    and ``stamp`` int64, ``places`` int32, ``fresh`` bool). What a loop only
    reads may be read-only: ``hit``, ``slots``, ``fresh`` (but in
    ``claim_rows``, which writes it), ``new_index`` in ``add_or_set_rows``,
    everything but ``out`` in ``gather_rows_dividing`` and the first six in
    ``claim_rows``. The row loops take float32 or float64 rows;
    ``gather_rows_dividing`` picks the loop compiled for their dtype."""

    add_rows: Any
    add_or_set_rows: Any
    gather_rows_dividing: Any
    claim_rows: Any


def _compile() -> Kernels:
    import numba
    from numba import types

    def array(dtype: Any, ndim: int, readonly: bool = False) -> Any:
        return types.Array(dtype, ndim, "C", readonly=readonly)

    counts = array(types.int64, 1)
    slots = array(types.int64, 1, readonly=True)  # accepts writable arrays too
    fresh = array(types.boolean, 1, readonly=True)
    places = array(types.int32, 1)
    stamped = (counts, types.int64)  # the stamp (a writable int64 array) and the ticket
    adds, sets = [], []
    gathers: dict[np.dtype[Any], Any] = {}
    for dtype, scalar in ((types.float32, np.float32), (types.float64, np.float64)):
        rows, hit = array(dtype, 2), array(dtype, 2, readonly=True)
        adds.append(types.void(rows, counts, slots, hit, *stamped))
        sets.append(
            types.void(rows, counts, slots, hit, fresh, places, slots, types.int64, *stamped)
        )
        gathers[np.dtype(scalar)] = numba.njit(
            types.void(hit, array(types.int64, 1, readonly=True), slots, rows), nogil=True
        )(gather_dividing(scalar))

    def gather_rows_dividing(rows: Array, counts: Array, order: Array, out: Array) -> None:
        gathers[rows.dtype](rows, counts, order, out)

    claim = types.int64(
        # read: the map, base, index, used, the round's indices and slots;
        # written: slots, fresh, new indices, merged indices and slots
        array(types.int32, 1, readonly=True), types.int64, slots, types.int64, slots, slots,
        counts, array(types.boolean, 1), counts, counts, counts,
    )  # fmt: skip
    # nogil: other accumulators' applies run meanwhile, and a take's gather
    # runs on several threads
    return Kernels(
        add_rows=numba.njit(adds, nogil=True)(add_rows),
        add_or_set_rows=numba.njit(sets, nogil=True)(add_or_set_rows),
        gather_rows_dividing=gather_rows_dividing,
        claim_rows=numba.njit(claim, nogil=True)(claim_rows),
    )


# _compile is looked up at each load: tests replace it
LOADER: Loader[Kernels] = Loader(lambda: _compile())


def load() -> Kernels | None:
    """The compiled loops, or None when numba is not available (see
    :meth:`compiled_loader.Loader.load`: compiled once per process)."""
    return LOADER.load()


def load_pending(dtype: np.dtype[Any], size: int) -> bool:
    """Whether a sparse gradient of ``size`` elements of ``dtype`` should call
    :func:`load` before it has been tried: callers that must not block (a lock
    holder) load first, elsewhere."""
    return not LOADER.tried and size >= MIN_ELEMENTS and dtype in KERNEL_DTYPES


def loaded() -> Kernels | None:
    """The compiled loops if an earlier :func:`load` made them, else None
    (never imports or compiles)."""
    return LOADER.kernels
