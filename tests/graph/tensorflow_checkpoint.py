"""TensorFlow's side of the checkpoint tests: run with TensorFlow installed.

``python -m tests.graph.tensorflow_checkpoint write DIR`` saves VARIABLES with
TensorFlow 2.21's ``tf.compat.v1.train.Saver`` as ``DIR/model-3`` (the state
file with relative paths); tests/graph/data/tensorflow_checkpoint/ is what it
wrote, kept for the runs without TensorFlow.

``python -m tests.graph.tensorflow_checkpoint read DIR`` restores DIR's latest
checkpoint into VARIABLES with TensorFlow's Saver, reads it with
``tf.train.load_checkpoint`` too, and prints both as one JSON line. Commands
can follow one another: ``write A read B``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import ml_dtypes
import numpy as np

# name -> value; every dtype the tests cover, a scalar, an empty tensor, a string
VARIABLES: dict[str, Any] = {
    "dense/kernel": np.arange(12, dtype=np.float32).reshape(3, 4) / 8,
    "dense/bias": np.array([-1.5, 0.25, 3.0, 65504.0], dtype=np.float16),
    "wide": np.array([[1e-300, -2.5], [np.pi, 1e300]], dtype=np.float64),
    "counts": np.array([2**31 - 1, -(2**31), 7], dtype=np.int32),
    "global_step": np.int64(3),
    "big_ids": np.array([2**62, -5], dtype=np.int64),
    "mask": np.array([True, False, True]),
    "empty": np.zeros((0, 2), dtype=np.float32),
    "half_precision": np.array([1.5, -0.0078125], dtype=ml_dtypes.bfloat16),
    "label": b"tf_accum",
}
STEP = 3


def as_json(value: Any) -> Any:
    """A value as JSON: [dtype name, shape, values] (strings decoded, bfloat16 as float)."""
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind == "S":
        items = [item.decode() for item in array.reshape(-1).tolist()]
        return ["string", list(array.shape), items]
    name = str(array.dtype)
    if name == "bfloat16":
        array = array.astype(np.float32)
    return [name, list(array.shape), array.reshape(-1).tolist()]


def _graph(tf: Any) -> tuple[Any, dict[str, Any]]:
    graph = tf.Graph()
    with graph.as_default():
        made = {}
        for name, value in VARIABLES.items():
            dtype = tf.bfloat16 if np.asarray(value).dtype == ml_dtypes.bfloat16 else None
            made[name] = tf.Variable(value, name=name, dtype=dtype)
    return graph, made


def write(directory: str) -> None:
    import tensorflow.compat.v1 as tf

    graph, _ = _graph(tf)
    with graph.as_default(), tf.Session() as session:
        saver = tf.train.Saver(save_relative_paths=True)
        session.run(tf.global_variables_initializer())
        saver.save(session, f"{directory}/model", global_step=STEP, write_meta_graph=False)


def read(directory: str) -> None:
    import tensorflow.compat.v1 as tf

    path = tf.train.latest_checkpoint(directory)
    reader = tf.train.load_checkpoint(directory)
    loaded = {name: as_json(reader.get_tensor(name)) for name in VARIABLES}
    graph, made = _graph(tf)
    with graph.as_default(), tf.Session() as session:
        tf.train.Saver().restore(session, path)
        restored = {name: as_json(session.run(v)) for name, v in made.items()}
    print(json.dumps({"path": path, "loaded": loaded, "restored": restored}))


if __name__ == "__main__":
    # pairs of command and folder, run in turn: ``write A read B``
    arguments = sys.argv[1:]
    for command, folder in zip(arguments[::2], arguments[1::2], strict=True):
        {"write": write, "read": read}[command](folder)
