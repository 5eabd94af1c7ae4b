"""Large arrays: through shared memory on one machine, through Ray's object store otherwise."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background
from tf_accum.distributed import RayResourceTable, bulk
from tf_accum.resources import set_table

raw = tfa.raw_ops
SIZE = 300_000  # 2.4 MB of float64: well above the threshold


def _round_trip(threads: int = 3, per_thread: int = 4) -> None:
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float64, shape=[SIZE], reduction_type="SUM")
    base = np.arange(SIZE, dtype=np.float64)

    def apply_all(t: int) -> None:
        for i in range(per_thread):
            raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=base * (t + i))

    workers = [Background(apply_all, t) for t in range(threads)]
    for w in workers:
        w.result()
    first = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float64)
    factor = sum(t + i for t in range(threads) for i in range(per_thread))
    assert first.dtype == np.float64 and first.shape == (SIZE,) and first.flags.writeable
    np.testing.assert_array_equal(first, base * factor)  # integers: exact in any order
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=1, gradient=-base)
    second = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float64)
    np.testing.assert_array_equal(second, -base)
    np.testing.assert_array_equal(first, base * factor)  # not a view of a reused buffer
    first[:] = 0  # the caller owns it


def test_large_gradients_from_many_threads_through_shared_memory(ray_table) -> None:
    assert bulk.available()
    _round_trip()


def test_large_gradients_through_the_object_store(ray_cluster, monkeypatch) -> None:
    monkeypatch.setattr(bulk, "available", lambda: False)
    table = RayResourceTable()
    previous = set_table(table)  # the appliers are plain threads: not a context table
    try:
        _round_trip(threads=2, per_thread=2)
    finally:
        set_table(previous)  # type: ignore[arg-type]
        table.close()


def test_a_large_mean_and_a_shape_error(ray_table) -> None:
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[SIZE])
    ones = np.ones(SIZE, np.float32)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=ones)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=3 * ones)
    with pytest.raises(
        tfa.errors.InvalidArgumentError, match=r"expected \[300000\], got \[300001\]"
    ):
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=np.ones(SIZE + 1, np.float32)
        )
    mean = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.float32)
    np.testing.assert_array_equal(mean, np.full(SIZE, 2, np.float32))


def test_a_buffer_file_left_by_an_ended_process_goes_when_another_is_made(
    tmp_path, monkeypatch
) -> None:
    """A process that ended before its host mapped its buffer leaves the file; the next
    buffer made (by any process) removes it, and leaves a live process's and other
    files alone."""
    import subprocess
    import sys

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait(timeout=60)
    monkeypatch.setattr(bulk, "SHM_DIR", str(tmp_path))
    left = tmp_path / f"tf_accum-{ended.pid}-{'a' * 32}"
    live = tmp_path / f"tf_accum-{os.getpid()}-{'b' * 32}"
    older = tmp_path / f"tf_accum-{'c' * 32}"  # no process id in it: not judged
    other = tmp_path / f"other-{ended.pid}-x"
    for path in (left, live, older, other):
        path.write_bytes(b"")
    made = bulk.CallerBuffer(1024, "caller")
    try:
        assert not left.exists()
        assert live.exists() and older.exists() and other.exists()
        assert made.name.startswith(f"tf_accum-{os.getpid()}-")
        assert (tmp_path / made.name).exists()  # until its host maps it
    finally:
        made.close()
    assert not (tmp_path / made.name).exists()
