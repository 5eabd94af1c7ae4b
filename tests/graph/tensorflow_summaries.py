"""Summary ops as TensorFlow and tf_accum build them: the same program for both.

``python -m tests.graph.tensorflow_summaries`` runs ``summaries`` and
``images`` with TensorFlow 2.21 and prints what each op gave (base64; images
decoded to pixels) as one JSON line; tests/graph/data/tensorflow_summaries.json
is what it printed, kept for the runs without TensorFlow.
``python -m tests.graph.tensorflow_summaries check`` prints that line, then
the events TensorFlow reads in an event file tf_accum wrote (``write_events``).
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from typing import Any

import numpy as np


def summaries(tf: Any) -> dict[str, Any]:
    """The summary ops of one graph, by case name (built in the default graph)."""
    loss = tf.summary.scalar("loss", tf.constant(3.5))
    with tf.name_scope("outer"):
        family = tf.summary.scalar("acc", tf.constant(0.0), family="fam")
    count = tf.summary.scalar("count", tf.constant(7, tf.int64))
    odd = tf.summary.scalar("odd name!", tf.constant(-1.25, tf.float64))
    values = [-1.0, 0.0, 0.0, 2.5, 1e-13, 100.0, -3e15, 0.1, 0.1 + 1e-9]
    weights = tf.summary.histogram("weights", tf.constant(values, tf.float64))
    empty = tf.summary.histogram("empty", tf.constant([], tf.float32))
    ints = tf.summary.histogram("ints", tf.constant([[1, 2], [3, 300]], tf.int32))
    rng = np.random.default_rng(7)
    noise = tf.summary.histogram("noise", tf.constant(rng.standard_normal(1000), tf.float32))
    merged = tf.summary.merge([loss, weights])
    everything = tf.summary.merge_all()
    return {
        "loss": loss,
        "family": family,
        "count": count,
        "odd": odd,
        "weights": weights,
        "empty": empty,
        "ints": ints,
        "noise": noise,
        "merged": merged,
        "everything": everything,
    }


def images(tf: Any) -> dict[str, Any]:
    """Image summary ops (their PNG bytes are the encoder's, so they compare as pixels)."""
    rng = np.random.default_rng(1)
    return {
        "unit": tf.summary.image("unit", tf.constant(rng.random((2, 3, 4, 1)), tf.float32)),
        "signed": tf.summary.image(
            "signed", tf.constant(rng.standard_normal((3, 2, 3, 3)) * 3, tf.float32), max_outputs=2
        ),
        "bytes": tf.summary.image(
            "bytes", tf.constant(rng.integers(0, 255, (1, 2, 2, 4)), tf.uint8), max_outputs=1
        ),
        "wide": tf.summary.image("wide", tf.constant(rng.random((1, 2, 2, 3)) * 1000, tf.float64)),
    }


def decoded_images(serialized: bytes) -> list[Any]:
    """[tag, height, width, colorspace, pixels] of each image of a serialized Summary."""
    import io

    from PIL import Image

    from tf_accum.graph.proto_messages import message_class

    found = []
    for value in message_class("Summary").FromString(serialized).value:
        picture = value.image
        pixels = np.asarray(Image.open(io.BytesIO(picture.encoded_image_string)))
        found.append(
            [value.tag, picture.height, picture.width, picture.colorspace, pixels.ravel().tolist()]
        )
    return found


def write_events(logdir: str) -> Any:
    """An event file written by tf_accum's FileWriter: the graph, three merged summaries
    and a summary message made by hand. Returns the FileWriter (closed)."""
    import tf_accum.compat.v1 as tfa

    graph = tfa.Graph()
    with graph.as_default():
        x = tfa.placeholder(tfa.float32, [], name="x")
        tfa.summary.scalar("loss", x)
        tfa.summary.histogram("weights", tfa.constant([1.0, 2.0, 3.0]))
        merged = tfa.summary.merge_all()
        writer = tfa.summary.FileWriter(logdir, graph)
        with tfa.Session() as session:
            for step in range(3):
                writer.add_summary(session.run(merged, {x: step / 2}), global_step=step)
    value = tfa.summary.Summary.Value(tag="manual", simple_value=7.0)
    writer.add_summary(tfa.summary.Summary(value=[value]), 10)
    writer.close()
    return writer


def events(path: str) -> list[Any]:
    """[step, kind, summary tags and simple values] of each event of an event file,
    as TensorFlow's summary_iterator reads them."""
    import tensorflow.compat.v1 as tf

    found = []
    for event in tf.train.summary_iterator(path):
        values = [[v.tag, v.simple_value] for v in event.summary.value]
        found.append([event.step, event.WhichOneof("what"), values])
    return found


def main() -> None:
    import tensorflow.compat.v1 as tf

    graph = tf.Graph()
    with graph.as_default():
        ops = summaries(tf)
        pictures = images(tf)
        names = {name: op.op.name for name, op in ops.items()}
        with tf.Session() as session:
            values, shown = session.run([ops, pictures])
    encoded = {name: base64.b64encode(value).decode() for name, value in values.items()}
    decoded = {name: decoded_images(value) for name, value in shown.items()}
    print(json.dumps({"names": names, "values": encoded, "images": decoded}))


def check() -> None:
    """``main``'s line, then what TensorFlow reads in an event file tf_accum wrote."""
    main()
    with tempfile.TemporaryDirectory() as logdir:
        print(json.dumps(events(str(write_events(logdir).event_file))))


if __name__ == "__main__":
    check() if sys.argv[1:2] == ["check"] else main()
