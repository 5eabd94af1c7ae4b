"""TensorFlow's ``compat`` namespace: ``tf_accum.compat.v1``."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tf_accum.compat import v1

__all__ = ["v1"]


def __getattr__(name: str) -> Any:
    # v1 brings graph mode with it: imported when first named, so that
    # ``import tf_accum.compat`` alone stays cheap
    if name == "v1":
        import importlib

        return importlib.import_module("tf_accum.compat.v1")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
