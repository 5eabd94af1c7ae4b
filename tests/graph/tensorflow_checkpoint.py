"""TensorFlow's side of the checkpoint tests: run with TensorFlow installed.

``python -m tests.graph.tensorflow_checkpoint write DIR`` saves VARIABLES with
TensorFlow 2.21's ``tf.compat.v1.train.Saver`` as ``DIR/model-3`` (the state
file with relative paths); tests/graph/data/tensorflow_checkpoint/ is what it
wrote, kept for the runs without TensorFlow.

``python -m tests.graph.tensorflow_checkpoint check`` saves VARIABLES with
tf_accum's Saver, restores them with TensorFlow's Saver and reads them with
``tf.train.load_checkpoint``, saves them with TensorFlow's Saver too, and
prints what TensorFlow found and wrote as one JSON line.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
from pathlib import Path
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
    """Save VARIABLES with TensorFlow's Saver as ``directory/model-STEP``."""
    import tensorflow.compat.v1 as tf

    graph, _ = _graph(tf)
    with graph.as_default(), tf.Session() as session:
        saver = tf.train.Saver(save_relative_paths=True)
        session.run(tf.global_variables_initializer())
        saver.save(session, f"{directory}/model", global_step=STEP, write_meta_graph=False)


def write_with_tf_accum(directory: str, step: int) -> None:
    """Save VARIABLES with tf_accum's Saver as ``directory/model-step``."""
    import tf_accum.compat.v1 as tfa

    graph, _ = _graph(tfa)
    with graph.as_default(), tfa.Session() as session:
        saver = tfa.train.Saver()
        session.run(tfa.global_variables_initializer())
        saver.save(session, f"{directory}/model", global_step=step)


def read(directory: str) -> dict[str, Any]:
    """What TensorFlow finds in ``directory``'s latest checkpoint: its path, the tensors
    ``load_checkpoint`` reads, and the variables' values after its Saver restores them."""
    import tensorflow.compat.v1 as tf

    path = tf.train.latest_checkpoint(directory)
    reader = tf.train.load_checkpoint(directory)
    loaded = {name: as_json(reader.get_tensor(name)) for name in VARIABLES}
    graph, made = _graph(tf)
    with graph.as_default(), tf.Session() as session:
        tf.train.Saver().restore(session, path)
        restored = {name: as_json(session.run(v)) for name, v in made.items()}
    return {"path": os.path.basename(path), "loaded": loaded, "restored": restored}


def check() -> None:
    """tf_accum writes a checkpoint that TensorFlow reads; TensorFlow writes one: both
    printed as one JSON line (TensorFlow's files base64-encoded)."""
    with tempfile.TemporaryDirectory() as scratch:
        ours, theirs = os.path.join(scratch, "ours"), os.path.join(scratch, "theirs")
        os.mkdir(ours)
        os.mkdir(theirs)
        write_with_tf_accum(ours, step=7)
        found = read(ours)
        write(theirs)
        written = {
            name: base64.b64encode(Path(theirs, name).read_bytes()).decode()
            for name in sorted(os.listdir(theirs))
        }
    print(json.dumps({"read": found, "written": written}))


if __name__ == "__main__":
    {"write": lambda: write(sys.argv[2]), "check": check}[sys.argv[1]]()
