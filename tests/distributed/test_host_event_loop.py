"""The host actor's event loop serves every accumulator of a container: nothing
slow may run on it. Here the host class runs in this process, on an asyncio
loop of the test's own (the loop is the same one Ray would give it)."""

from __future__ import annotations

import asyncio
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
def test_the_first_large_apply_compiles_off_the_event_loop(case: Any) -> None:
    """float16 (half_kernel) and sparse float32 (sparse_kernel) loops alike."""
    module, spec, (op, *arguments) = case()
    blocked = BlockedCompile()

    async def scenario() -> None:
        host = ResourceHost("test")
        instance, entry = await host.run(("create", "big", "", spec, "caller", None))
        apply = asyncio.ensure_future(host.run((op, instance, entry, *arguments)))
        try:
            assert await asyncio.to_thread(blocked.compiling.wait, WAIT)
            # the loop answers other calls while the loops compile
            count = await asyncio.wait_for(
                host.run(("num_accumulated", instance, entry)), timeout=WAIT
            )
            assert count == 0
            assert not apply.done()
        finally:
            blocked.finish.set()
        assert await asyncio.wait_for(apply, timeout=WAIT) is None
        assert await host.run(("num_accumulated", instance, entry)) == 1
        taken = await host.run(("take", instance, entry, 1, 0.0, "a", "caller", None))
        values = taken if op == "apply_dense" else taken.values
        assert values.dtype == spec.dtype.as_numpy_dtype and bool((values == 1).all())

    with fresh_kernels(module, blocked):
        asyncio.run(scenario())
