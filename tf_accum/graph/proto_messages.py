"""The protocol buffer messages of TensorFlow's checkpoint and summary files.

The messages are declared here as field lists (name, number, type) and made
into classes by the ``protobuf`` package, in a descriptor pool of their own:
the bytes and the text format they read and write are TensorFlow's, as only
the field numbers, types and names count on the wire. ``protobuf`` is
imported when a message class is first asked for (it is in the ``tf1``
extra), so ``import tf_accum`` does not load it.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from tf_accum import errors

# a field: (name, number, type, repeated, message type or None, oneof or None)
Field = tuple[str, int, str, bool, "str | None", "str | None"]

PACKAGE = "tf_accum.wire"


def _field(
    name: str,
    number: int,
    kind: str,
    repeated: bool = False,
    message: str | None = None,
    oneof: str | None = None,
) -> Field:
    return (name, number, kind, repeated, message, oneof)


# TensorFlow's enums (DataType, BundleHeaderProto.Endianness) are declared as int32:
# the wire format of both is the same varint.
MESSAGES: dict[str, list[Field]] = {
    # tensorflow/core/framework/versions.proto
    "VersionDef": [
        _field("producer", 1, "int32"),
        _field("min_consumer", 2, "int32"),
        _field("bad_consumer_versions", 3, "int32", repeated=True),
    ],
    # tensorflow/core/framework/tensor_shape.proto
    "TensorShapeProto.Dim": [_field("size", 1, "int64"), _field("name", 2, "string")],
    "TensorShapeProto": [
        _field("dim", 2, "message", repeated=True, message="TensorShapeProto.Dim"),
        _field("unknown_rank", 3, "bool"),
    ],
    # tensorflow/core/protobuf/tensor_bundle.proto
    "BundleHeaderProto": [
        _field("num_shards", 1, "int32"),
        _field("endianness", 2, "int32"),
        _field("version", 3, "message", message="VersionDef"),
    ],
    "BundleEntryProto": [
        _field("dtype", 1, "int32"),
        _field("shape", 2, "message", message="TensorShapeProto"),
        _field("shard_id", 3, "int32"),
        _field("offset", 4, "int64"),
        _field("size", 5, "int64"),
        _field("crc32c", 6, "fixed32"),
        # TensorSliceProto messages, kept as bytes: tf_accum reads none (see checkpoint_format)
        _field("slices", 7, "bytes", repeated=True),
    ],
    # tensorflow/python/training/checkpoint_state.proto
    "CheckpointState": [
        _field("model_checkpoint_path", 1, "string"),
        _field("all_model_checkpoint_paths", 2, "string", repeated=True),
        _field("all_model_checkpoint_timestamps", 3, "double", repeated=True),
        _field("last_preserved_timestamp", 4, "double"),
    ],
    # tensorflow/core/framework/graph.proto and node_def.proto, without attributes
    "NodeDef": [
        _field("name", 1, "string"),
        _field("op", 2, "string"),
        _field("input", 3, "string", repeated=True),
        _field("device", 4, "string"),
    ],
    "GraphDef": [
        _field("node", 1, "message", repeated=True, message="NodeDef"),
        _field("versions", 4, "message", message="VersionDef"),
    ],
    # tensorflow/core/framework/summary.proto
    "HistogramProto": [
        _field("min", 1, "double"),
        _field("max", 2, "double"),
        _field("num", 3, "double"),
        _field("sum", 4, "double"),
        _field("sum_squares", 5, "double"),
        _field("bucket_limit", 6, "double", repeated=True),
        _field("bucket", 7, "double", repeated=True),
    ],
    "Summary.Image": [
        _field("height", 1, "int32"),
        _field("width", 2, "int32"),
        _field("colorspace", 3, "int32"),
        _field("encoded_image_string", 4, "bytes"),
    ],
    "Summary.Value": [
        _field("node_name", 7, "string"),
        _field("tag", 1, "string"),
        _field("simple_value", 2, "float", oneof="value"),
        _field("obsolete_old_style_histogram", 3, "bytes", oneof="value"),
        _field("image", 4, "message", message="Summary.Image", oneof="value"),
        _field("histo", 5, "message", message="HistogramProto", oneof="value"),
    ],
    "Summary": [_field("value", 1, "message", repeated=True, message="Summary.Value")],
}

_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _pool() -> Any:
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
    except ImportError:
        raise errors.UnimplementedError(
            None,
            None,
            "TensorFlow's checkpoint and summary files need the protobuf package: "
            "pip install 'tf-accum[tf1]'",
        ) from None
    kinds = descriptor_pb2.FieldDescriptorProto
    type_numbers = {
        "int32": kinds.TYPE_INT32,
        "int64": kinds.TYPE_INT64,
        "fixed32": kinds.TYPE_FIXED32,
        "bool": kinds.TYPE_BOOL,
        "string": kinds.TYPE_STRING,
        "bytes": kinds.TYPE_BYTES,
        "float": kinds.TYPE_FLOAT,
        "double": kinds.TYPE_DOUBLE,
        "message": kinds.TYPE_MESSAGE,
    }
    file = descriptor_pb2.FileDescriptorProto(
        name="tf_accum/wire.proto", package=PACKAGE, syntax="proto3"
    )
    declared: dict[str, Any] = {}
    # outer messages first, so that nested ones find their parent
    for full_name in sorted(MESSAGES, key=lambda n: n.count(".")):
        fields = MESSAGES[full_name]
        outer, _, inner = full_name.partition(".")
        if inner:
            message = declared[outer].nested_type.add(name=inner)
        else:
            message = file.message_type.add(name=outer)
        declared[full_name] = message
        oneofs: list[str] = []
        for name, number, kind, repeated, nested, oneof in fields:
            field = message.field.add(
                name=name,
                number=number,
                type=type_numbers[kind],
                label=kinds.LABEL_REPEATED if repeated else kinds.LABEL_OPTIONAL,
            )
            if nested is not None:
                field.type_name = f".{PACKAGE}.{nested}"
            if oneof is not None:
                if oneof not in oneofs:
                    oneofs.append(oneof)
                    message.oneof_decl.add(name=oneof)
                field.oneof_index = oneofs.index(oneof)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


@functools.cache
def message_class(name: str) -> Any:
    """The class of message ``name`` (``"BundleEntryProto"``, ``"Summary.Value"``, ...).

    Raises:
        UnimplementedError: the protobuf package is not installed.
    """
    with _lock:
        pool = _pool()
        from google.protobuf import message_factory

        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))


__all__ = ["MESSAGES", "message_class"]
