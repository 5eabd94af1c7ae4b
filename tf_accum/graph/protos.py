"""``RunOptions``, ``ConfigProto`` and friends: TF1's option messages.

Only ``RunOptions.timeout_in_ms`` changes anything here. The others are
accepted so that programs written for TensorFlow run unchanged: any field can
be set (``config.gpu_options.allow_growth = True``) and reads back what was set.
"""

from __future__ import annotations

from typing import Any, ClassVar


class OptionMessage:
    """A message whose fields are set by keyword or attribute; unknown fields
    read as nested messages, so nested settings can be written as in TensorFlow."""

    DEFAULTS: ClassVar[dict[str, Any]] = {}

    def __init__(self, **fields: Any) -> None:
        for name, value in {**self.DEFAULTS, **fields}.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        child = OptionMessage()
        object.__setattr__(self, name, child)
        return child

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class RunOptions(OptionMessage):
    """Options of one ``Session.run``: ``timeout_in_ms`` (0: no limit) bounds the run.

    On expiry the run raises DeadlineExceededError and a take it was waiting
    in is withdrawn without consuming anything.
    """

    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3
    DEFAULTS: ClassVar[dict[str, Any]] = {"timeout_in_ms": 0, "trace_level": 0}


class RunMetadata(OptionMessage):
    """Accepted by ``Session.run``; left empty."""


class ConfigProto(OptionMessage):
    """Session configuration: accepted; its settings do not apply in process."""

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "allow_soft_placement": False,
        "log_device_placement": False,
        "inter_op_parallelism_threads": 0,
        "intra_op_parallelism_threads": 0,
    }


class GPUOptions(OptionMessage):
    """Accepted inside a ConfigProto; tf_accum runs on the CPU."""


class GraphOptions(OptionMessage):
    """Accepted inside a ConfigProto."""
