"""``tf.compat.v1.summary``: summary ops and the FileWriter that writes them for TensorBoard.

``Summary`` (with ``Summary.Value``, ``Summary.Image``) is the message
class, made when first asked for (it needs the ``protobuf`` package).
"""

from typing import Any

from tf_accum.graph.summary_ops import histogram, image, merge, merge_all, scalar
from tf_accum.graph.summary_writer import FileWriter, FileWriterCache

__all__ = [
    "scalar",
    "histogram",
    "image",
    "merge",
    "merge_all",
    "FileWriter",
    "FileWriterCache",
    "Summary",  # noqa: F822 - made by __getattr__ at first use
]


def __getattr__(name: str) -> Any:
    if name == "Summary":
        from tf_accum.graph.proto_messages import message_class

        return message_class("Summary")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
