"""TF1's summary ops: ``scalar``, ``histogram``, ``image``, ``merge``, ``merge_all``.

Each builds an op (``ScalarSummary``, ``HistogramSummary``, ``ImageSummary``,
``MergeSummary``, named as TensorFlow names them) whose value is a serialized
``Summary`` message (a bytes scalar), the same bytes TensorFlow's op gives,
for a ``FileWriter`` to write (tf_accum.graph.summary_writer). Eagerly, each
returns those bytes at once. The messages are made with the ``protobuf``
package (the ``tf1`` extra; see tf_accum.graph.proto_messages); an image is
encoded as PNG with Pillow.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, string
from tf_accum.graph import mode
from tf_accum.graph.graph import Graph
from tf_accum.graph.ops import constant, graph_input, infer_array
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.shapes import kernel_text

_log = logging.getLogger(__name__)

Array = np.ndarray[Any, Any]
SUMMARIES = "summaries"
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")
# the real number types TensorFlow's summary ops take
_REAL = (
    "float32",
    "float64",
    "int32",
    "uint8",
    "int16",
    "int8",
    "int64",
    "bfloat16",
    "uint16",
    "float16",
    "uint32",
    "uint64",
)


def _clean_tag(name: str | None) -> str | None:
    """``name`` with characters TensorBoard cannot show replaced by ``_`` (logged)."""
    if name is None:
        return None
    cleaned = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
    if cleaned != name:
        _log.info("Summary name %s is illegal; using %s instead.", name, cleaned)
    return cleaned


@contextmanager
def _summary_scope(graph: Graph | None, name: str, family: str | None) -> Iterator[tuple[str, str]]:
    """The summary's tag and its op's name scope, as TensorFlow makes them."""
    name = _clean_tag(name) or ""
    family = _clean_tag(family)
    base = name if family is None else f"{family}/{name}"
    if graph is None:
        tag = base
        yield (tag, f"{base}/")
        return
    with graph.name_scope(base) as scope:
        tag = scope.rstrip("/") if family is None else f"{family}/{scope.rstrip('/')}"
        yield (tag, scope)


def _check_real(dtype: DType, parameter: str) -> None:
    if dtype.name not in _REAL:
        raise TypeError(
            f"Value passed to parameter '{parameter}' has DataType {dtype.name} not in list of "
            f"allowed values: {', '.join(_REAL)}"
        )


def _serialized(message: Any) -> Any:
    data: bytes = message.SerializeToString()
    return np.array(data, dtype=object)


def _summary_op(
    graph: Graph | None,
    op_type: str,
    scope: str,
    tag: str,
    tag_input: str,
    value: Any,
    parameter: str,
    make: Callable[[str, Array], Any],
    collections: Sequence[str] | None,
) -> Any:
    """Build (or, eagerly, run) a summary op of ``value`` under ``tag``."""
    if graph is None:
        array = np.asarray(infer_array(value))
        found = _dtype_of(array)
        _check_real(found, parameter)
        serialized: bytes = make(tag, array).SerializeToString()
        return serialized
    source = graph_input(graph, value)
    _check_real(source.dtype, parameter)
    with graph.name_scope(scope):
        tags = constant(tag, name=tag_input)
    op = graph.create_op(
        op_type,
        [tags, source],
        [(string, TensorShape([]))],
        lambda context, inputs: (_serialized(make(tag, np.asarray(inputs[1]))),),
        name=scope,
        attrs={"T": source.dtype},
    )
    output = op.outputs[0]
    for key in collections if collections is not None else [SUMMARIES]:
        graph.add_to_collection(key, output)
    return output


def _dtype_of(array: Array) -> DType:
    from tf_accum.graph.ops import dtype_of_array

    return dtype_of_array(array)


# --- scalars ---


def _scalar_message(tag: str, value: Array) -> Any:
    from tf_accum.graph.proto_messages import message_class

    if value.shape != ():
        raise errors.InvalidArgumentError(
            None,
            None,
            f"tags and values are not the same shape: [] != {kernel_text(value.shape)} "
            f"(tag '{tag}')",
        )
    summary = message_class("Summary")()
    summary.value.add(tag=tag, simple_value=float(value))
    return summary


def scalar(
    name: str,
    tensor: Any,
    collections: Sequence[str] | None = None,
    family: str | None = None,
) -> Any:
    """A summary of one real number, under the tag ``name`` (in the name scope).

    Added to the ``summaries`` collection unless ``collections`` says otherwise.

    Raises:
        TypeError: a tensor that is not of a real number type.
        InvalidArgumentError: a value that is not a scalar (when it runs).
    """
    graph = mode.building_graph()
    with _summary_scope(graph, name, family) as (tag, scope):
        return _summary_op(
            graph,
            "ScalarSummary",
            scope,
            tag,
            "tags",
            tensor,
            "values",
            _scalar_message,
            collections,
        )


# --- histograms ---


@functools.lru_cache(maxsize=1)
def bucket_limits() -> Array:
    """TensorFlow's histogram bucket limits: +-1e-12 growing by 10% up to 1e20, 0, +-DBL_MAX."""
    positive = []
    limit = 1.0e-12
    while limit < 1.0e20:
        positive.append(limit)
        limit *= 1.1
    positive.append(sys.float_info.max)
    negative = [-v for v in reversed(positive)]
    limits = np.array([*negative, 0.0, *positive])
    limits.setflags(write=False)
    return limits


def _histogram_message(tag: str, values: Array) -> Any:
    from tf_accum.graph.proto_messages import message_class

    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    if np.isnan(flat).any():
        raise errors.InvalidArgumentError(None, None, f"Nan in summary histogram for: {tag}")
    if np.isinf(flat).any():
        raise errors.InvalidArgumentError(None, None, f"Infinity in summary histogram for: {tag}")
    limits = bucket_limits()
    counts = np.bincount(np.searchsorted(limits, flat, side="right"), minlength=len(limits))
    summary = message_class("Summary")()
    histogram = summary.value.add(tag=tag).histo
    if flat.size:
        # TensorFlow adds the values one after another: a running sum, not a pairwise one
        histogram.min, histogram.max = float(flat.min()), float(flat.max())
        histogram.num = float(flat.size)
        histogram.sum = float(np.cumsum(flat)[-1])
        histogram.sum_squares = float(np.cumsum(flat * flat)[-1])
    else:
        histogram.min, histogram.max = sys.float_info.max, -sys.float_info.max
    # runs of empty buckets become one bucket, ending where the run ends
    position, total = 0, len(limits)
    while position < total:
        end, count = limits[position], counts[position]
        position += 1
        if count <= 0:
            while position < total and counts[position] <= 0:
                end, count = limits[position], counts[position]
                position += 1
        histogram.bucket_limit.append(float(end))
        histogram.bucket.append(float(count))
    return summary


def histogram(
    name: str,
    values: Any,
    collections: Sequence[str] | None = None,
    family: str | None = None,
) -> Any:
    """A summary of the distribution of ``values`` (any shape), in TensorFlow's buckets.

    Raises:
        TypeError: values that are not of a real number type.
        InvalidArgumentError: a NaN or an infinity among them (when it runs).
    """
    graph = mode.building_graph()
    with _summary_scope(graph, name, family) as (tag, scope):
        return _summary_op(
            graph,
            "HistogramSummary",
            scope,
            tag,
            "tag",
            values,
            "values",
            _histogram_message,
            collections,
        )


# --- images ---


def _image_pixels(image: Array) -> Array:
    """One image as uint8 pixels: floats scaled as TensorFlow's ImageSummary scales them
    (in float64 for float64 images, else float32), then truncated."""
    if image.dtype == np.uint8:
        return image
    kind = np.float64 if image.dtype == np.float64 else np.float32
    values = image.astype(kind)
    finite = values[np.isfinite(values)]
    low = float(finite.min()) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 0.0
    if low < 0:
        largest = max(abs(low), abs(high))
        scale, offset = (0.0 if largest < 1e-6 else 127.0 / largest), 128.0
    else:
        scale, offset = (0.0 if high < 1e-6 else 255.0 / high), 0.0
    # the scale is a float32 whatever the image's type, as in TensorFlow's kernel
    scaled = values * kind(np.float32(scale)) + kind(offset)
    scaled = np.where(np.isfinite(scaled), scaled, 0.0)
    return np.clip(np.floor(scaled), 0, 255).astype(np.uint8)


def _image_message(max_outputs: int) -> Callable[[str, Array], Any]:
    def make(tag: str, batch: Array) -> Any:
        from tf_accum.graph.proto_messages import message_class

        if batch.ndim != 4 or batch.shape[-1] not in (1, 3, 4):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Tensor must be 4-D with last dim 1, 3, or 4, not {kernel_text(batch.shape)}",
            )
        summary = message_class("Summary")()
        count = min(max_outputs, batch.shape[0])
        for i in range(count):
            pixels = _image_pixels(batch[i])
            label = f"{tag}/image" if max_outputs == 1 else f"{tag}/image/{i}"
            image = summary.value.add(tag=label).image
            image.height, image.width, image.colorspace = pixels.shape
            image.encoded_image_string = _png(pixels)
        return summary

    return make


def _png(pixels: Array) -> bytes:
    try:
        from PIL import Image
    except ImportError:
        raise errors.UnimplementedError(
            None, None, "image summaries need Pillow to encode PNG: pip install 'tf-accum[tf1]'"
        ) from None
    import io

    channels = pixels.shape[-1]
    picture = Image.fromarray(pixels[..., 0] if channels == 1 else pixels)
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


def image(
    name: str,
    tensor: Any,
    max_outputs: int = 3,
    collections: Sequence[str] | None = None,
    family: str | None = None,
) -> Any:
    """A summary of up to ``max_outputs`` images of a ``[batch, height, width, channels]``
    tensor (1, 3 or 4 channels), as PNG. uint8 pixels are kept; floats are scaled to
    0..255 (non-negative ones so that the largest is 255, others around 128).

    Raises:
        TypeError: a tensor that is not of a real number type.
        InvalidArgumentError: a tensor of another shape (when it runs).
    """
    graph = mode.building_graph()
    with _summary_scope(graph, name, family) as (tag, scope):
        return _summary_op(
            graph,
            "ImageSummary",
            scope,
            tag,
            "tag",
            tensor,
            "tensor",
            _image_message(int(max_outputs)),
            collections,
        )


# --- merging ---


def _merged(serialized: Sequence[Any]) -> Any:
    from tf_accum.graph.proto_messages import message_class

    summary_class = message_class("Summary")
    merged = summary_class()
    seen: set[str] = set()
    for item in serialized:
        data = item.item() if isinstance(item, np.ndarray) else item
        part = summary_class.FromString(bytes(data))
        for value in part.value:
            if value.tag in seen:
                raise errors.InvalidArgumentError(
                    None, None, f"Duplicate tag {value.tag} found in summary inputs "
                )
            seen.add(value.tag)
            merged.value.append(value)
    return merged


def merge(inputs: Sequence[Any], collections: Sequence[str] | None = None, name: Any = None) -> Any:
    """One summary holding the values of ``inputs`` (serialized summaries).

    Raises:
        InvalidArgumentError: two values with one tag (when it runs).
    """
    graph = mode.building_graph()
    if graph is None:
        merged: bytes = _merged(list(inputs)).SerializeToString()
        return merged
    sources = [graph_input(graph, item) for item in inputs]
    with graph.name_scope(name or "Merge"):
        op = graph.create_op(
            "MergeSummary",
            sources,
            [(string, TensorShape([]))],
            lambda context, values: (_serialized(_merged(values)),),
            name="MergeSummary",
            attrs={"N": len(sources)},
        )
    output = op.outputs[0]
    for key in collections or ():
        graph.add_to_collection(key, output)
    return output


def merge_all(key: str = SUMMARIES, scope: str | None = None, name: Any = None) -> Any:
    """A merge of every summary in collection ``key`` of the default graph, or None if
    there are none.

    Raises:
        RuntimeError: in eager mode.
    """
    graph = mode.building_graph()
    if graph is None:
        raise RuntimeError(
            "Merging tf.summary.* ops is not compatible with eager execution. Use "
            "tf.contrib.summary instead."
        )
    found = graph.get_collection(key, scope)
    if not found:
        return None
    return merge(found, name=name)


__all__ = ["bucket_limits", "histogram", "image", "merge", "merge_all", "scalar"]
