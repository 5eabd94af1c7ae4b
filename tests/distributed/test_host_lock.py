"""A host serves every accumulator of a container from threads that share one
lock: nothing slow may run holding it. Here the host class runs in this
process, its calls on threads of the test's own, as Ray's would run them."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import WAIT, BlockedCompile, fresh_kernels
from tf_accum.accumulators import half_kernel, sparse_kernel
from tf_accum.accumulators.spec import AccumulatorSpec
from tf_accum.distributed.host import ResourceHost


def dense_narrow() -> tuple[Any, AccumulatorSpec, tuple[Any, ...]]:
    size = half_kernel.MIN_ELEMENTS
    spec = AccumulatorSpec("dense", tfa.float16, (size,), "MEAN")
    return half_kernel, spec, ("apply_dense", 0, np.ones(size, np.float16))


def sparse_rows() -> tuple[Any, AccumulatorSpec, tuple[Any, ...]]:
    shape = (4, sparse_kernel.MIN_ELEMENTS // 4)
    spec = AccumulatorSpec("sparse", tfa.float32, shape, "MEAN")
    values = np.ones(shape, np.float32)
    return sparse_kernel, spec, ("apply_sparse", 0, np.arange(4), values, None)


@pytest.mark.parametrize("case", [dense_narrow, sparse_rows])
def test_the_first_large_apply_compiles_without_the_hosts_lock(case: Any) -> None:
    """float16 (half_kernel) and sparse float32 (sparse_kernel) loops alike."""
    module, spec, (op, *arguments) = case()
    blocked = BlockedCompile()
    host = ResourceHost("test")
    with fresh_kernels(module, blocked), concurrent.futures.ThreadPoolExecutor(2) as pool:
        instance, entry = host.run(("create", "big", "", spec, "caller", None))
        apply = pool.submit(host.run, (op, instance, entry, *arguments))
        try:
            assert blocked.compiling.wait(WAIT)
            # other calls are answered while the loops compile
            count = pool.submit(host.run, ("num_accumulated", instance, entry))
            assert count.result(timeout=WAIT) == 0
            assert not apply.done()
        finally:
            blocked.finish.set()
        assert apply.result(timeout=WAIT) is None
    assert host.run(("num_accumulated", instance, entry)) == 1
    taken = host.run(("take", instance, entry, 1, 0.0, "a", "caller", None))
    values = taken if op == "apply_dense" else taken.values
    assert values.dtype == spec.dtype.as_numpy_dtype and bool((values == 1).all())
