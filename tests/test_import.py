"""What ``import tf_accum`` loads, and that what it leaves for later still works.

``import tf_accum`` brings in numpy and the dtypes and errors only; the raw
ops, the compat classes with graph mode, the distributed tables and
ml_dtypes (needed for bfloat16 alone) load at their first use. Each check
runs in a fresh interpreter, since this test process has loaded them all.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LATER = (
    "ml_dtypes",
    "tf_accum.graph",
    "tf_accum.compat",
    "tf_accum.raw_ops",
    "tf_accum.accumulators",
    "tf_accum.distributed",
    "numba",
    "llvmlite",
    "scipy",
    "ray",
    "tensorflow",
)


def run_fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def loaded_after(code: str) -> set[str]:
    out = run_fresh(f"import sys\n{code}\nprint('\\n'.join(sys.modules))")
    return {m for m in out.split() if m.split(".")[0] in {p.split(".")[0] for p in LATER}}


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_import_loads_none_of_what_waits_for_first_use() -> None:
    loaded = loaded_after("import tf_accum")
    assert not [m for m in loaded if any(_matches(m, p) for p in LATER)], sorted(loaded)


def test_import_loads_only_the_dtypes_and_errors_of_the_package() -> None:
    out = run_fresh(
        "import sys, numpy\n"
        "before = set(sys.modules)\n"
        "import tf_accum\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('tf_accum')))"
    )
    assert out.strip() == "['tf_accum', 'tf_accum.dtypes', 'tf_accum.errors']"


def test_every_public_name_resolves_and_is_listed() -> None:
    out = run_fresh(
        """
        import types
        import tf_accum as tfa
        from tf_accum.indexed_slices import IndexedSlices
        from tf_accum.raw_ops.common import accumulator_stats

        for name in tfa.__all__:
            assert getattr(tfa, name) is not None, name
            assert name in dir(tfa), name
        assert tfa.IndexedSlices is IndexedSlices
        assert tfa.accumulator_stats is accumulator_stats
        assert isinstance(tfa.compat.v1, types.ModuleType)
        assert "v1" in dir(tfa.compat)
        assert tfa.sparse.SparseConditionalAccumulator is (
            tfa.compat.v1.SparseConditionalAccumulator
        )
        print(tfa.raw_ops.__all__[0], tfa.distributed.__name__)
        """
    )
    assert out.split() == ["ConditionalAccumulator", "tf_accum.distributed"]


def test_star_import_and_from_import_give_the_lazy_names() -> None:
    run_fresh(
        """
        from tf_accum import *  # noqa: F403
        from tf_accum import IndexedSlices as slices, raw_ops as ops
        assert compat.v1.ConditionalAccumulator is not None
        assert ops is raw_ops and slices is IndexedSlices
        assert callable(accumulator_stats) and bfloat16.name == "bfloat16"
        """
    )


def test_an_unknown_name_is_an_attribute_error() -> None:
    import tf_accum

    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        tf_accum.nothing_here  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'v2'"):
        tf_accum.compat.v2  # noqa: B018


def test_a_program_using_the_accumulators_works_from_a_fresh_import() -> None:
    out = run_fresh(
        """
        import numpy as np
        import tf_accum as tfa
        acc = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[2])
        acc.apply_grad([1.0, 2.0], local_step=0)
        h = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.bfloat16, shape=[1])
        g = np.array([1.5], tfa.bfloat16.as_numpy_dtype)
        tfa.raw_ops.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=g)
        got = tfa.raw_ops.ResourceAccumulatorTakeGradient(
            handle=h, num_required=1, dtype=tfa.bfloat16
        )
        print(acc.take_grad(1).tolist(), got.dtype, got.tolist())
        """
    )
    assert out.split("\n")[0] == "[1.0, 2.0] bfloat16 [1.5]"


def test_bfloat16_by_name_needs_no_ml_dtypes_until_its_numpy_type() -> None:
    out = run_fresh(
        """
        import sys
        import tf_accum as tfa
        assert tfa.as_dtype("bfloat16") is tfa.bfloat16 is tfa.as_dtype(14)
        assert tfa.bfloat16.is_floating and not tfa.bfloat16.is_integer
        assert tfa.bfloat16 == "bfloat16" and repr(tfa.bfloat16) == "tf_accum.bfloat16"
        print("ml_dtypes" in sys.modules)
        import ml_dtypes
        assert tfa.bfloat16.numpy_dtype == ml_dtypes.bfloat16
        assert tfa.bfloat16.as_numpy_dtype is ml_dtypes.bfloat16
        print("ml_dtypes" in sys.modules)
        """
    )
    assert out.split() == ["False", "True"]


def test_the_numpy_type_of_bfloat16_loads_ml_dtypes() -> None:
    out = run_fresh(
        """
        import sys
        import tf_accum as tfa
        print("ml_dtypes" in sys.modules)
        found = tfa.bfloat16.numpy_dtype
        print("ml_dtypes" in sys.modules, found == sys.modules["ml_dtypes"].bfloat16)
        print(tfa.as_dtype(found) is tfa.bfloat16)
        """
    )
    assert out.split() == ["False", "True", "True", "True"]


@pytest.mark.parametrize(
    "lookup",
    [
        "d.as_dtype(ml_dtypes.bfloat16) is d.bfloat16",
        "d.as_dtype(np.dtype(ml_dtypes.bfloat16)) is d.bfloat16",
        "d.from_numpy(np.zeros(2, ml_dtypes.bfloat16).dtype) is d.bfloat16",
        "d.kernel_type_name(np.dtype(ml_dtypes.bfloat16)) == 'bfloat16'",
        "d.bfloat16 == ml_dtypes.bfloat16",
    ],
)
def test_ml_dtypes_bfloat16_made_before_tf_accum_needed_it_is_recognised(lookup: str) -> None:
    # The program imported ml_dtypes itself; tf_accum had not yet loaded it.
    out = run_fresh(
        f"""
        import ml_dtypes
        import numpy as np
        import tf_accum.dtypes as d
        assert d.bfloat16._numpy_dtype is None
        print({lookup})
        """
    )
    assert out.strip() == "True"


def test_other_user_defined_dtypes_stay_unknown() -> None:
    out = run_fresh(
        """
        import ml_dtypes
        import numpy as np
        import tf_accum.dtypes as d
        try:
            d.as_dtype(ml_dtypes.float8_e4m3fn)
        except TypeError as e:
            print("TypeError", "to a TensorFlow DType" in str(e))
        print(d.from_numpy(np.dtype(ml_dtypes.float8_e4m3fn)))
        """
    )
    assert out.split() == ["TypeError", "True", "None"]


def test_an_array_of_bfloat16_made_first_is_accumulated() -> None:
    out = run_fresh(
        """
        import ml_dtypes
        import numpy as np
        import tf_accum as tfa
        raw = tfa.raw_ops
        h = raw.ResourceConditionalAccumulator(dtype=tfa.bfloat16, shape=[2])
        g = np.array([1.0, 3.0], ml_dtypes.bfloat16)
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=g)
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=g * 2)
        got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.bfloat16)
        print(got.dtype, got.tolist())
        """
    )
    assert out.strip() == "bfloat16 [1.5, 4.5]"


def test_accumulators_of_other_dtypes_leave_ml_dtypes_unimported() -> None:
    """ml_dtypes' extension is paid for bfloat16 alone: float32 and float16
    accumulators (small and large sums, SUM and MEAN, dense and sparse) made,
    applied and taken through the raw ops never import it; a bfloat16 one does,
    and sums and divides in bfloat16."""
    out = run_fresh(
        """
        import sys
        import numpy as np
        import tf_accum as tfa
        raw = tfa.raw_ops
        for dtype in (tfa.float32, tfa.float16):
            for size in (1, 5000, 1 << 17):
                h = raw.ResourceConditionalAccumulator(
                    dtype=dtype, shape=[size], reduction_type="MEAN"
                )
                for _ in range(2):
                    raw.ResourceAccumulatorApplyGradient(
                        handle=h, local_step=0, gradient=np.full(size, 3, dtype.numpy_dtype)
                    )
                got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=dtype)
                assert got.dtype == dtype.numpy_dtype and (got == 3).all()
            s = raw.SparseConditionalAccumulator(dtype=dtype, shape=[4, 2])
            raw.SparseAccumulatorApplyGradient(
                handle=s, local_step=0, gradient_indices=np.array([1], np.int64),
                gradient_values=np.ones((1, 2), dtype.numpy_dtype),
                gradient_shape=np.array([4, 2], np.int64), has_known_shape=True,
            )  # fmt: skip
            taken = raw.SparseAccumulatorTakeGradient(handle=s, num_required=1, dtype=dtype)
            assert taken.values.tolist() == [[1.0, 1.0]]
        print("ml_dtypes" in sys.modules)
        h = raw.ResourceConditionalAccumulator(
            dtype=tfa.bfloat16, shape=[5000], reduction_type="MEAN"
        )
        print("ml_dtypes" in sys.modules)
        for value in (1.0, 2.0):
            raw.ResourceAccumulatorApplyGradient(
                handle=h, local_step=0, gradient=np.full(5000, value, tfa.bfloat16.numpy_dtype)
            )
        got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.bfloat16)
        print(got.dtype, got[0], (got == got[0]).all())
        """
    )
    assert out.split() == ["False", "True", "bfloat16", "1.5", "True"]
