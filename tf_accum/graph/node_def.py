"""``Operation.node_def`` and ``Graph.as_graph_def()``: a graph as TensorFlow's
protocol buffers describe it (NodeDef, GraphDef, AttrValue, TensorShapeProto,
TensorProto), so that a program or test comparing them with text such as
``name: 'Q' op: 'ResourceConditionalAccumulator' attr { key: 'dtype' value
{ type: DT_FLOAT } }`` finds what TensorFlow would give.

The messages are real protocol buffer messages (``protobuf``, in the ``tf1``
extra), with TensorFlow's field names and numbers, described here and kept in
a descriptor pool of tf_accum's own (so they never clash with TensorFlow's
when both are loaded). A node lists its inputs as TensorFlow does
(``op``, ``op:1`` for a second output, ``^op`` for a control input), its
device, and its attributes: those it was built with, the raw op's defaults
for the rest, and the dtype attributes TensorFlow infers from the inputs.
A constant's value is a TensorProto holding its bytes (``tensor_content``).
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

import numpy as np

from tf_accum import dtypes as _dtypes
from tf_accum.graph.tensor_shape import TensorShape

if TYPE_CHECKING:
    from tf_accum.graph.graph import Graph, Operation

_PACKAGE = "tf_accum.graph_def"
# Attributes tf_accum keeps on ops that TensorFlow's ops do not have.
_OURS = frozenset({"timeout"})

# TensorFlow's DataType numbers (reference types are 100 more).
_ENUM = {
    "float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "string": 7,
    "complex64": 8, "int64": 9, "bool": 10, "qint8": 11, "quint8": 12, "qint32": 13,
    "bfloat16": 14, "qint16": 15, "quint16": 16, "uint16": 17, "complex128": 18,
    "float16": 19, "resource": 20, "variant": 21, "uint32": 22, "uint64": 23,
}  # fmt: skip
_ENUM_NAMES = {
    "float32": "DT_FLOAT", "float64": "DT_DOUBLE", "float16": "DT_HALF",
}  # fmt: skip


def _enum_name(dtype_name: str) -> str:
    return _ENUM_NAMES.get(dtype_name, "DT_" + dtype_name.upper())


@functools.cache
def _classes() -> dict[str, Any]:
    """The message classes, made once (protobuf is imported here, at first use).

    Raises:
        ImportError: protobuf is not installed.
    """
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "node_def and as_graph_def() need protobuf: pip install 'tf-accum[tf1]'"
        ) from error

    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="tf_accum/graph_def.proto", package=_PACKAGE, syntax="proto3"
    )
    data_type = file.enum_type.add(name="DataType")
    data_type.value.add(name="DT_INVALID", number=0)
    for dtype_name, number in _ENUM.items():
        data_type.value.add(name=_enum_name(dtype_name), number=number)
    for dtype_name, number in _ENUM.items():
        data_type.value.add(name=_enum_name(dtype_name) + "_REF", number=number + 100)

    def message(name: str, parent: Any = None) -> Any:
        return (parent.nested_type if parent is not None else file.message_type).add(name=name)

    def field(
        owner: Any, name: str, number: int, kind: int, label: int = 1, type_name: str = ""
    ) -> Any:
        added = owner.field.add(name=name, number=number, type=kind, label=label)
        if type_name:
            added.type_name = f".{_PACKAGE}.{type_name}"
        return added

    repeated = f.LABEL_REPEATED
    shape = message("TensorShapeProto")
    dim = message("Dim", shape)
    field(dim, "size", 1, f.TYPE_INT64)
    field(dim, "name", 2, f.TYPE_STRING)
    field(shape, "dim", 2, f.TYPE_MESSAGE, repeated, "TensorShapeProto.Dim")
    field(shape, "unknown_rank", 3, f.TYPE_BOOL)

    tensor = message("TensorProto")
    field(tensor, "dtype", 1, f.TYPE_ENUM, type_name="DataType")
    field(tensor, "tensor_shape", 2, f.TYPE_MESSAGE, type_name="TensorShapeProto")
    field(tensor, "tensor_content", 4, f.TYPE_BYTES)
    field(tensor, "string_val", 8, f.TYPE_BYTES, repeated)

    attr = message("AttrValue")
    values = message("ListValue", attr)
    field(values, "s", 2, f.TYPE_BYTES, repeated)
    field(values, "i", 3, f.TYPE_INT64, repeated)
    field(values, "f", 4, f.TYPE_FLOAT, repeated)
    field(values, "b", 5, f.TYPE_BOOL, repeated)
    field(values, "type", 6, f.TYPE_ENUM, repeated, "DataType")
    field(values, "shape", 7, f.TYPE_MESSAGE, repeated, "TensorShapeProto")
    field(values, "tensor", 8, f.TYPE_MESSAGE, repeated, "TensorProto")
    attr.oneof_decl.add(name="value")
    for name, number, kind, type_name in (
        ("list", 1, f.TYPE_MESSAGE, "AttrValue.ListValue"),
        ("s", 2, f.TYPE_BYTES, ""),
        ("i", 3, f.TYPE_INT64, ""),
        ("f", 4, f.TYPE_FLOAT, ""),
        ("b", 5, f.TYPE_BOOL, ""),
        ("type", 6, f.TYPE_ENUM, "DataType"),
        ("shape", 7, f.TYPE_MESSAGE, "TensorShapeProto"),
        ("tensor", 8, f.TYPE_MESSAGE, "TensorProto"),
    ):
        field(attr, name, number, kind, type_name=type_name).oneof_index = 0

    node = message("NodeDef")
    field(node, "name", 1, f.TYPE_STRING)
    field(node, "op", 2, f.TYPE_STRING)
    field(node, "input", 3, f.TYPE_STRING, repeated)
    field(node, "device", 4, f.TYPE_STRING)
    entry = message("AttrEntry", node)
    entry.options.map_entry = True
    field(entry, "key", 1, f.TYPE_STRING)
    field(entry, "value", 2, f.TYPE_MESSAGE, type_name="AttrValue")
    field(node, "attr", 5, f.TYPE_MESSAGE, repeated, "NodeDef.AttrEntry")

    versions = message("VersionDef")
    field(versions, "producer", 1, f.TYPE_INT32)
    field(versions, "min_consumer", 2, f.TYPE_INT32)
    graph = message("GraphDef")
    field(graph, "node", 1, f.TYPE_MESSAGE, repeated, "NodeDef")
    field(graph, "versions", 4, f.TYPE_MESSAGE, type_name="VersionDef")

    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptors = {
        name: pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")
        for name in ("NodeDef", "GraphDef", "AttrValue")
    }
    make = getattr(message_factory, "GetMessageClass", None)
    if make is None:  # protobuf before 4.22
        make = message_factory.MessageFactory(pool).GetPrototype
    return {name: make(descriptor) for name, descriptor in descriptors.items()}


def _dtype_enum(dtype: Any) -> int:
    name = getattr(dtype, "name", str(dtype))
    if name.endswith("_ref"):
        return _ENUM[name[: -len("_ref")]] + 100
    return _ENUM[name]


def _set_shape(proto: Any, shape: Any) -> None:
    dims = _dims(shape)
    if dims is None:
        proto.unknown_rank = True
        return
    for size in dims:
        proto.dim.add(size=-1 if size is None else int(size))


def _dims(shape: Any) -> list[int | None] | None:
    if shape is None:
        return None
    if isinstance(shape, TensorShape):
        return shape.as_list() if shape.rank is not None else None
    return [None if d is None or d == -1 else int(d) for d in shape]


def _set_tensor(proto: Any, array: np.ndarray[Any, Any]) -> None:
    dtype = _dtypes.as_dtype(array.dtype) if array.dtype.kind not in "OSU" else _dtypes.string
    proto.dtype = _dtype_enum(dtype)
    _set_shape(proto.tensor_shape, array.shape)
    if dtype == _dtypes.string:
        proto.string_val.extend(
            v if isinstance(v, bytes) else str(v).encode() for v in array.reshape(-1)
        )
    else:
        proto.tensor_content = (
            np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        )


def _is_shape_key(key: str) -> bool:
    return key in ("shape", "element_shape") or key.endswith("_shape")


def _set_attr(value_proto: Any, key: str, value: Any) -> None:
    """``value`` as an AttrValue, by its Python type (and its key, for shapes)."""
    if isinstance(value, _dtypes.DType):
        value_proto.type = _dtype_enum(value)
    elif isinstance(value, (bool, np.bool_)):
        value_proto.b = bool(value)
    elif isinstance(value, (int, np.integer)):
        value_proto.i = int(value)
    elif isinstance(value, (float, np.floating)):
        value_proto.f = float(value)
    elif isinstance(value, str):
        value_proto.s = value.encode("utf-8", "surrogateescape")
    elif isinstance(value, bytes):
        value_proto.s = value
    elif isinstance(value, np.ndarray):
        _set_tensor(value_proto.tensor, value)
    elif isinstance(value, TensorShape) or value is None or (_is_shape_key(key)):
        _set_shape(value_proto.shape, value)
    elif isinstance(value, (list, tuple)):
        _set_list(value_proto.list, key, list(value))
    else:
        value_proto.s = str(value).encode()


def _set_list(proto: Any, key: str, items: list[Any]) -> None:
    if key == "shapes" or any(isinstance(v, (TensorShape, list, tuple)) for v in items):
        for item in items:
            _set_shape(proto.shape.add(), item)
    elif all(isinstance(v, _dtypes.DType) for v in items):
        proto.type.extend(_dtype_enum(v) for v in items)
    elif all(isinstance(v, (bool, np.bool_)) for v in items):
        proto.b.extend(bool(v) for v in items)
    elif all(isinstance(v, (int, np.integer)) for v in items):
        proto.i.extend(int(v) for v in items)
    elif all(isinstance(v, (float, np.floating)) for v in items):
        proto.f.extend(float(v) for v in items)
    else:
        proto.s.extend(v if isinstance(v, bytes) else str(v).encode() for v in items)


def _raw_op_attrs(op: Operation) -> dict[str, Any]:
    """A raw op's attributes as TensorFlow's node has them: the defaults of
    those not given, and the dtypes it infers from the inputs."""
    from tf_accum import raw_ops
    from tf_accum.raw_ops.op_table import COMPONENTS, OPS, VALUES

    spec = OPS.get(op.type)
    if spec is None:
        return {}
    found: dict[str, Any] = {}
    inputs = dict(spec.inputs)
    for name, parameter in inspect.signature(getattr(raw_ops, op.type)).parameters.items():
        if name in inputs or name in _OURS or name == "name":
            continue
        if parameter.default is not inspect.Parameter.empty:
            found[name] = parameter.default
    for arg, kind in spec.inputs:
        if kind == VALUES:
            found["dtype"] = op.inputs[[a for a, _ in spec.inputs].index(arg)].dtype
        elif kind == COMPONENTS:
            found["Tcomponents"] = [t.dtype for t in op.inputs[len(spec.inputs) - 1 :]]
    return found


def _input_name(tensor: Any) -> str:
    index: int = tensor.value_index
    name: str = tensor.op.name
    return name if index == 0 else f"{name}:{index}"


def node_def(op: Operation) -> Any:
    """``op`` as a NodeDef message (see the module's docstring)."""
    message = _classes()["NodeDef"](name=op.name, op=op.type, device=op.device or "")
    message.input.extend(_input_name(t) for t in op.inputs)
    data_inputs = {t.op for t in op.inputs}
    # as TensorFlow: a control input that is a data input already is not repeated
    message.input.extend(f"^{c.name}" for c in op.control_inputs if c not in data_inputs)
    attrs = {**_raw_op_attrs(op), **op._attrs}
    for key, value in attrs.items():
        if key in _OURS:
            continue
        _set_attr(message.attr[key], key, value)
    return message


def graph_def(graph: Graph) -> Any:
    """Every op of ``graph``, in the order they were made, as a GraphDef message."""
    message = _classes()["GraphDef"]()
    for op in graph.get_operations():
        message.node.append(node_def(op))
    return message


__all__ = ["graph_def", "node_def"]
