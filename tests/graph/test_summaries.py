"""tf.summary: the summary ops give TensorFlow's bytes, and FileWriter writes event files
that TensorFlow and TensorBoard read.

tests/graph/tensorflow_summaries.py is one program for both: its ops'
values under TensorFlow 2.21 are kept in tests/graph/data/tensorflow_summaries.json
(and checked live when TensorFlow is installed).
"""

from __future__ import annotations

import base64
import json
import logging
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.tensorflow_summaries import decoded_images, images, summaries, write_events
from tests.live_tensorflow import live_job, live_result
from tf_accum import errors
from tf_accum.graph import summary_writer
from tf_accum.graph.checkpoint_format import crc32c, mask

pytestmark = pytest.mark.usefixtures("graph")

RECORDED = json.loads((Path(__file__).parent / "data" / "tensorflow_summaries.json").read_text())
# TensorFlow's values today and its reading of tf_accum's event file, in a child process
_LIVE_JOB = live_job(
    "summaries: TensorFlow's values and its reading of tf_accum's event file",
    "tests.graph.tensorflow_summaries",
    "check",
)


def _tensorflow(covered_by: str) -> list[Any]:
    """The JSON lines tests/graph/tensorflow_summaries.py printed, run with TensorFlow
    (the test skips without a live TensorFlow)."""
    done = live_result(_LIVE_JOB, covered_by)
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-2:]]


# --- the ops ---


def test_summary_ops_give_tensorflows_bytes_and_names() -> None:
    ops = summaries(tf)
    assert {name: op.op.name for name, op in ops.items()} == RECORDED["names"]
    with tf.Session() as sess:
        values = sess.run(ops)
    for name, value in values.items():
        assert isinstance(value, bytes), name
        assert base64.b64encode(value).decode() == RECORDED["values"][name], name


def test_image_summaries_give_tensorflows_pixels() -> None:
    with tf.Session() as sess:
        shown = sess.run(images(tf))
    assert {name: decoded_images(value) for name, value in shown.items()} == RECORDED["images"]


@pytest.mark.background(_LIVE_JOB)
def test_the_record_is_what_tensorflow_gives_today() -> None:
    assert _tensorflow("the record stands for it")[0] == RECORDED


def test_summaries_go_to_collections_and_merge_all() -> None:
    loss = tf.summary.scalar("loss", tf.constant(1.0))
    private = tf.summary.scalar("private", tf.constant(2.0), collections=["mine"])
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == [loss]
    assert tf.get_collection("mine") == [private]
    assert tf.summary.merge_all(key="nothing") is None
    merged = tf.summary.merge_all("mine")
    with tf.Session() as sess:
        summary = tf.summary.Summary.FromString(sess.run(merged))
    assert [(v.tag, v.simple_value) for v in summary.value] == [("private", 2.0)]


def test_eager_summaries_are_their_bytes() -> None:
    loss = tf.summary.scalar("loss", tf.constant(3.5))
    with tf.Session() as sess:
        in_graph = sess.run(loss)
    from tf_accum.graph import mode

    graph = mode.building_graph()
    assert graph is not None
    mode.pop_graph(graph)
    try:
        eager = tf.summary.scalar("loss", 3.5)
        assert eager == in_graph
        both = tf.summary.merge([eager, tf.summary.histogram("h", [1.0, 2.0])])
        assert [v.tag for v in tf.summary.Summary.FromString(both).value] == ["loss", "h"]
        with pytest.raises(RuntimeError, match="not compatible with eager execution"):
            tf.summary.merge_all()
        with pytest.raises(RuntimeError, match="not compatible with eager execution"):
            tf.summary.FileWriter("logs")
    finally:
        mode.push_graph(graph)


def test_summary_errors_are_tensorflows() -> None:
    with pytest.raises(TypeError, match="DataType bool not in list of allowed values"):
        tf.summary.scalar("flag", tf.constant(True))
    with pytest.raises(TypeError, match="DataType string not in list of allowed values"):
        tf.summary.histogram("text", tf.constant(["a"]))
    pair = tf.summary.scalar("pair", tf.constant([1.0, 2.0]))
    values = tf.placeholder(tf.float32, [None])
    spread = tf.summary.histogram("spread", values)
    picture = tf.summary.image("picture", tf.placeholder(tf.float32, None, name="pixels"))
    one = tf.summary.scalar("one", tf.constant(1.0))
    twice = tf.summary.merge([one, one])
    with tf.Session() as sess:
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"tags and values are not the same shape: \[\] != \[2\] \(tag 'pair'\)",
        ):
            sess.run(pair)
        with pytest.raises(
            errors.InvalidArgumentError, match="Nan in summary histogram for: spread"
        ):
            sess.run(spread, {values: [1.0, np.nan]})
        with pytest.raises(
            errors.InvalidArgumentError, match="Infinity in summary histogram for: spread"
        ):
            sess.run(spread, {values: [np.inf]})
        with pytest.raises(errors.InvalidArgumentError, match="Duplicate tag one found"):
            sess.run(twice, {})
        with pytest.raises(errors.InvalidArgumentError, match="4-D with last dim 1, 3, or 4"):
            sess.run(picture, {"pixels:0": np.zeros((2, 2, 2))})


# --- event files ---


def _records(path: Path) -> list[bytes]:
    """The records of a TFRecord file, their framing and checksums checked."""
    data = path.read_bytes()
    found, position = [], 0
    while position < len(data):
        header = data[position : position + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack_from("<I", data, position + 8)
        assert header_crc == mask(crc32c(header))
        record = data[position + 12 : position + 12 + length]
        (record_crc,) = struct.unpack_from("<I", data, position + 12 + length)
        assert record_crc == mask(crc32c(record))
        found.append(record)
        position += 16 + length
    return found


def _events(path: Path) -> list[Any]:
    from tensorboard.compat.proto import event_pb2

    return [event_pb2.Event.FromString(record) for record in _records(path)]


def _only_file(logdir: Path) -> Path:
    (found,) = list(logdir.glob("events.out.tfevents.*"))
    return found


def test_file_writer_writes_event_files(tmp_path: Path) -> None:
    threads = threading.active_count()
    writer = write_events(str(tmp_path))
    assert threading.active_count() == threads  # nothing that could hold up exit
    path = _only_file(tmp_path)
    assert writer.event_file == str(path) and writer.get_logdir() == str(tmp_path)
    events = _events(path)
    assert events[0].file_version == "brain.Event:2"
    nodes = {node.name: node for node in _graph_def(events[1].graph_def).node}
    assert nodes["loss"].op == "ScalarSummary" and list(nodes["loss"].input) == ["loss/tags", "x"]
    written = [(e.step, [(v.tag, v.simple_value) for v in e.summary.value]) for e in events[2:]]
    assert [(step, [tag for tag, _ in values]) for step, values in written] == [
        (0, ["loss", "weights"]),
        (1, ["loss", "weights"]),
        (2, ["loss", "weights"]),
        (10, ["manual"]),
    ]
    assert [values[0][1] for _, values in written] == [0.0, 0.5, 1.0, 7.0]
    assert events[2].summary.value[1].histo.num == 3


@pytest.mark.background(_LIVE_JOB)
def test_tensorflow_reads_tf_accums_event_files() -> None:
    assert _tensorflow("the record checks stand")[1] == [
        [0, "file_version", []],
        [0, "graph_def", []],
        [0, "summary", [["loss", 0.0], ["weights", 0.0]]],
        [1, "summary", [["loss", 0.5], ["weights", 0.0]]],
        [2, "summary", [["loss", 1.0], ["weights", 0.0]]],
        [10, "summary", [["manual", 7.0]]],
    ]


def _graph_def(data: bytes) -> Any:
    from tf_accum.graph.proto_messages import message_class

    return message_class("GraphDef").FromString(data)


def test_events_wait_for_max_queue_or_flush(tmp_path: Path) -> None:
    summary = tf.summary.Summary(value=[tf.summary.Summary.Value(tag="a", simple_value=1.0)])
    writer = tf.summary.FileWriter(str(tmp_path / "logs"), max_queue=3, flush_secs=3600)
    path = _only_file(tmp_path / "logs")
    assert len(_records(path)) == 1  # the file version, at once
    writer.add_summary(summary, 1)  # the first event: at once too, as in TensorFlow
    assert len(_records(path)) == 2
    writer.add_summary(summary, 2)
    writer.add_summary(summary, 3)
    assert len(_records(path)) == 2
    writer.add_summary(summary, 4)  # the third waiting event: all are written
    assert len(_records(path)) == 5
    writer.add_summary(summary, 5)
    writer.flush()
    assert len(_records(path)) == 6
    writer.close()
    writer.add_summary(summary, 6)  # dropped: closed
    assert len(_records(path)) == 6
    writer.reopen()
    writer.add_summary(summary, 7)
    writer.close()
    assert writer.event_file != str(path)
    assert [e.step for e in _events(Path(str(writer.event_file)))] == [0, 7]


def test_threads_adding_summaries_at_once_lose_none(tmp_path: Path) -> None:
    writer = tf.summary.FileWriter(str(tmp_path), max_queue=7)
    summary = tf.summary.Summary(value=[tf.summary.Summary.Value(tag="a", simple_value=1.0)])

    def add_some(first: int) -> None:
        for step in range(first, first + 50):
            writer.add_summary(summary, step)

    threads = [threading.Thread(target=add_some, args=(1000 * i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    writer.close()
    steps = sorted(e.step for e in _events(_only_file(tmp_path))[1:])
    assert steps == sorted(1000 * i + k for i in range(4) for k in range(50))


def test_file_writer_cache_shares_one_writer_per_directory(tmp_path: Path) -> None:
    first = tf.summary.FileWriterCache.get(str(tmp_path / "a"))
    assert tf.summary.FileWriterCache.get(str(tmp_path / "a")) is first
    other = tf.summary.FileWriterCache.get(str(tmp_path / "b"))
    assert other is not first
    tf.summary.FileWriterCache.clear()
    assert tf.summary.FileWriterCache.get(str(tmp_path / "a")) is not first
    tf.summary.FileWriterCache.clear()
    with tf.summary.FileWriter(str(tmp_path / "c")) as writer:
        writer.add_session_log(tf.summary.Summary(), 3)  # any serialized message
        writer.add_meta_graph(b"", 4)
    events = _events(_only_file(tmp_path / "c"))
    assert [(e.step, e.WhichOneof("what")) for e in events] == [
        (0, "file_version"),
        (3, "session_log"),
        (4, "meta_graph_def"),
    ]


def test_without_tensorboard_file_writers_warn_once_and_write_nothing(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    monkeypatch.setattr(summary_writer, "_tensorboard", lambda: None)
    monkeypatch.setattr(summary_writer, "_warned", threading.Event())
    loss = tf.summary.scalar("loss", tf.constant(1.0))
    with caplog.at_level(logging.WARNING, logger=summary_writer.__name__):
        first = tf.summary.FileWriter(str(tmp_path / "logs"), tf.get_default_graph())
        second = tf.summary.FileWriter(str(tmp_path / "logs"))
    with tf.Session() as sess:
        first.add_summary(sess.run(loss), 1)
    first.flush()
    first.close()
    second.close()
    assert first.event_file is None
    assert not (tmp_path / "logs").exists()
    warnings = [r for r in caplog.records if r.name == summary_writer.__name__]
    assert len(warnings) == 1 and "tensorboard is not installed" in warnings[0].getMessage()


def test_a_chief_supervisors_graph_is_in_its_event_file_before_any_stop(tmp_path: Path) -> None:
    # TensorFlow's writer writes its first event at once: a TF1 program that never
    # stops its Supervisor (as TensorFlow's mnist_replica.py) still leaves the graph.
    g = tf.Graph()
    with g.as_default():
        step = tf.train.get_or_create_global_step()
        tf.Variable([1.0, 2.0], name="w")
        sv = tf.train.Supervisor(graph=g, logdir=str(tmp_path), global_step=step, save_model_secs=0)
    sess = sv.prepare_or_wait_for_session()
    try:
        events = _events(_only_file(tmp_path))
        assert events[0].file_version == "brain.Event:2"
        graphs = [e for e in events if e.HasField("graph_def")]
        assert len(graphs) == 1
        assert "w" in [node.name for node in _graph_def(graphs[0].graph_def).node]
    finally:
        sv.stop()
        sess.close()
