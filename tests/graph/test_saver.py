"""tf.train.Saver and the checkpoint files: TensorFlow's format, both ways.

The checkpoints are TensorFlow's (format V2): tf_accum writes the same bytes
TensorFlow 2.21 writes for the same variables (checked against
tests/graph/data/tensorflow_checkpoint/, which TensorFlow wrote; see
tests/graph/tensorflow_checkpoint.py), restores what TensorFlow wrote, and
TensorFlow reads and restores what tf_accum writes (live, when it is installed).
"""

from __future__ import annotations

import base64
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.tensorflow_checkpoint import STEP, VARIABLES, as_json
from tests.live_tensorflow import last_json_line, live_job, live_result
from tf_accum import errors
from tf_accum.graph.checkpoint_format import CheckpointReader, write_checkpoint

pytestmark = pytest.mark.usefixtures("graph")

FIXTURE = Path(__file__).resolve().parent / "data" / "tensorflow_checkpoint"


def _variables(values: dict[str, Any]) -> dict[str, tf.Variable]:
    made = {}
    for name, value in values.items():
        dtype = tf.bfloat16 if np.asarray(value).dtype == ml_dtypes.bfloat16 else None
        made[name] = tf.Variable(value, name=name, dtype=dtype)
    return made


def _same(got: Any, wanted: Any) -> bool:
    got, wanted = np.asarray(got), np.asarray(wanted)
    kinds_match = got.dtype == wanted.dtype
    if wanted.dtype.kind == "S":  # a string tensor: bytes objects
        kinds_match = got.dtype.kind in "OS"
    same: bool = kinds_match and got.shape == wanted.shape and got.tolist() == wanted.tolist()
    return same


# --- round trips ---


ROUND_TRIP = {
    "f16": np.array([1.5, -65504.0, 6e-8], dtype=np.float16),
    "f32": np.linspace(-1, 1, 7, dtype=np.float32).reshape(7, 1),
    "f64": np.array([[np.pi, -0.0], [1e-310, np.inf]]),
    "i32": np.array([-(2**31), 2**31 - 1], dtype=np.int32),
    "i64": np.array([2**63 - 1, -(2**63)], dtype=np.int64),
    "flag": np.array([[True], [False]]),
    "scalar": np.float32(2.5),
    "step": np.int64(11),
    "empty": np.zeros((3, 0), dtype=np.float64),
    "bf16": np.array([0.5, -3.0], dtype=ml_dtypes.bfloat16),
    "large": np.arange(3 * 1024 * 1024, dtype=np.float32).reshape(1024, 3072),
}


def test_save_and_restore_round_trip_every_dtype(tmp_path: Path) -> None:
    made = _variables(ROUND_TRIP)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "model"))
    assert path == str(tmp_path / "model")
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint",
        "model.data-00000-of-00001",
        "model.index",
    ]
    # a new session's variables start uninitialised: restoring initialises them
    with tf.Session() as sess:
        saver.restore(sess, path)
        for name, variable in made.items():
            assert _same(sess.run(variable), ROUND_TRIP[name]), name
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_variable_to_shape_map() == {
        k: list(np.shape(v)) for k, v in ROUND_TRIP.items()
    }
    assert reader.get_variable_to_dtype_map()["bf16"] == tf.bfloat16
    assert tf.train.list_variables(str(tmp_path))[0] == ("bf16", [2])
    assert _same(tf.train.load_variable(str(tmp_path), "i64:0"), ROUND_TRIP["i64"])
    # as TensorFlow's reader: scalars as numpy scalars
    assert type(reader.get_tensor("step")) is np.int64 and reader.get_tensor("step") == 11


def test_restore_replaces_values_and_string_variables_round_trip(tmp_path: Path) -> None:
    w = tf.Variable([1.0, 2.0], name="w")
    label = tf.Variable(b"first", name="label")
    saver = tf.train.Saver({"weights": w, "label": label})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saved = saver.save(sess, str(tmp_path / "m"))
        sess.run([w.assign([5.0, 6.0]), label.assign(b"second")])
        saver.restore(sess, saved)
        assert sess.run(w).tolist() == [1.0, 2.0] and sess.run(label) == b"first"
    # the dict's names are the checkpoint's
    assert tf.train.load_checkpoint(saved).get_tensor("weights").tolist() == [1.0, 2.0]


def test_op_names_and_saver_def_are_tensorflows() -> None:
    tf.Variable(1.0, name="v")
    saver = tf.train.Saver()
    names = {op.name: op.type for op in tf.get_default_graph().get_operations()}
    for name, kind in {
        "save/Const": "PlaceholderWithDefault",
        "save/SaveV2": "SaveV2",
        "save/SaveV2/tensor_names": "Const",
        "save/control_dependency": "Identity",
        "save/RestoreV2": "RestoreV2",
        "save/AssignVariableOp": "AssignVariableOp",
        "save/restore_all": "NoOp",
    }.items():
        assert names[name] == kind
    definition = saver.saver_def
    assert (
        definition.filename_tensor_name,
        definition.save_tensor_name,
        definition.restore_op_name,
        definition.max_to_keep,
        definition.version,
    ) == ("save/Const:0", "save/control_dependency:0", "save/restore_all", 5, 2)
    assert tf.train.Saver().saver_def.restore_op_name == "save_1/restore_all"


def test_the_save_ops_run_as_ops(tmp_path: Path) -> None:
    v = tf.Variable([3, 4], name="v")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(v.initializer)
        prefix = str(tmp_path / "direct")
        # the save tensor is the path (a fed string fetches as it was fed)
        saved = sess.run(saver.saver_def.save_tensor_name, {"save/Const:0": prefix})
        assert saved in (prefix, prefix.encode())
        assert CheckpointReader(prefix).tensor("v").tolist() == [3, 4]
        sess.run(v.assign([0, 0]))
        sess.run("save/restore_all", {"save/Const:0": prefix})
        assert sess.run(v).tolist() == [3, 4]


def test_eager_saver_saves_and_restores_eager_variables(tmp_path: Path) -> None:
    with _no_graph():
        v = tf.Variable([1.0, 2.0], name="v")
        saver = tf.train.Saver([v])
        path = saver.save(None, str(tmp_path / "eager"))
        v.assign([9.0, 9.0])
        saver.restore(None, path)
        assert v.numpy().tolist() == [1.0, 2.0]
        with pytest.raises(RuntimeError, match="`var_list` must specify"):
            tf.train.Saver()


class _no_graph:
    """Eager mode on this thread: the graph fixture's default graph set aside."""

    def __enter__(self) -> None:
        from tf_accum.graph import mode

        graph = mode.building_graph()
        assert graph is not None
        self._graph = graph
        mode.pop_graph(graph)

    def __exit__(self, *exc: object) -> None:
        from tf_accum.graph import mode

        mode.push_graph(self._graph)


# --- keeping and finding checkpoints ---


def test_max_to_keep_deletes_the_oldest_files_and_the_state_file_follows(tmp_path: Path) -> None:
    step = tf.Variable(0, name="global_step", trainable=False)
    saver = tf.train.Saver(max_to_keep=2)
    with tf.Session() as sess:
        sess.run(step.initializer)
        for value in range(4):
            sess.run(step.assign(value * 10))
            saved = saver.save(sess, str(tmp_path / "model"), global_step=step)
            assert saved == f"{tmp_path}/model-{value * 10}"
    kept = [f"{tmp_path}/model-20", f"{tmp_path}/model-30"]
    assert saver.last_checkpoints == kept
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint",
        "model-20.data-00000-of-00001",
        "model-20.index",
        "model-30.data-00000-of-00001",
        "model-30.index",
    ]
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == kept[-1]
    assert list(state.all_model_checkpoint_paths) == kept
    assert (tmp_path / "checkpoint").read_text() == (
        f'model_checkpoint_path: "{kept[1]}"\n'
        f'all_model_checkpoint_paths: "{kept[0]}"\n'
        f'all_model_checkpoint_paths: "{kept[1]}"\n'
    )
    assert tf.train.latest_checkpoint(str(tmp_path)) == kept[-1]
    assert tf.train.checkpoint_exists(kept[0]) and not tf.train.checkpoint_exists(
        f"{tmp_path}/model-0"
    )


def test_max_to_keep_none_keeps_everything_and_saving_a_path_again_moves_it_last(
    tmp_path: Path,
) -> None:
    tf.Variable(1.0)
    saver = tf.train.Saver(max_to_keep=None)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in (1, 2, 3):
            saver.save(sess, str(tmp_path / "m"), global_step=step)
    assert len(list(tmp_path.glob("*.index"))) == 3
    # nothing is recorded: the state file names the latest only
    assert list(tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths) == [
        f"{tmp_path}/m-3"
    ]
    again = tf.train.Saver(max_to_keep=3)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in (1, 2, 1):
            again.save(sess, str(tmp_path / "m"), global_step=step)
    assert again.last_checkpoints == [f"{tmp_path}/m-2", f"{tmp_path}/m-1"]


def test_threads_saving_at_once_keep_max_to_keep_and_a_true_state_file(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from tf_accum.graph import saver as saver_module
    from tf_accum.graph.checkpoint_management import update_checkpoint_state as writes

    delays = iter(np.random.default_rng(3).uniform(0, 0.01, 1000))

    def slow_write(*args: Any, **kwargs: Any) -> None:
        # uneven delays: saves that would interleave their state files, if they could
        time.sleep(next(delays))
        writes(*args, **kwargs)

    monkeypatch.setattr(saver_module, "update_checkpoint_state", slow_write)
    tf.Variable(np.zeros(1000, np.float32))
    saver = tf.train.Saver(max_to_keep=3)
    failures: list[BaseException] = []

    def save_some(sess: Any, first: int) -> None:
        try:
            for step in range(first, first + 5):
                saver.save(sess, str(tmp_path / "m"), global_step=step)
        except BaseException as error:  # reported by the test thread
            failures.append(error)

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        threads = [threading.Thread(target=save_some, args=(sess, 100 * i)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    kept = saver.last_checkpoints
    assert len(kept) == 3
    assert sorted(str(p)[: -len(".index")] for p in tmp_path.glob("*.index")) == sorted(kept)
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert list(state.all_model_checkpoint_paths) == kept
    assert state.model_checkpoint_path == kept[-1]


def test_keep_checkpoint_every_n_hours_keeps_one_per_period(tmp_path: Path) -> None:
    tf.Variable(1.0)
    # a period of 0.36 s from the Saver's making: of the checkpoints max_to_keep drops,
    # the first saved after the period ends is kept, and the period starts again
    saver = tf.train.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=0.0001)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(tmp_path / "m"), global_step=0)
        time.sleep(0.5)
        saver.save(sess, str(tmp_path / "m"), global_step=1)  # m-0, saved within it: deleted
        saver.save(sess, str(tmp_path / "m"), global_step=2)  # m-1, saved after it: kept
        saver.save(sess, str(tmp_path / "m"), global_step=3)  # m-2, within the next: deleted
    assert sorted(p.name for p in tmp_path.glob("*.index")) == ["m-1.index", "m-3.index"]


def test_recover_last_checkpoints_and_relative_paths(tmp_path: Path, monkeypatch: Any) -> None:
    tf.Variable(1.0)
    monkeypatch.chdir(tmp_path)
    os.mkdir("run")
    saver = tf.train.Saver(max_to_keep=2, save_relative_paths=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in (1, 2):
            saver.save(sess, "run/model", global_step=step)
    assert (tmp_path / "run" / "checkpoint").read_text().splitlines()[0] == (
        'model_checkpoint_path: "model-2"'
    )
    assert tf.train.latest_checkpoint("run") == "run/model-2"
    # a new Saver (a restarted job) takes over the old ones and deletes them in turn
    fresh = tf.train.Saver(max_to_keep=2)
    fresh.recover_last_checkpoints(["run/model-1", "run/model-2", "run/model-gone"])
    assert fresh.last_checkpoints == ["run/model-1", "run/model-2"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        fresh.save(sess, "run/model", global_step=3)
    assert sorted(os.listdir("run")) == [
        "checkpoint",
        "model-2.data-00000-of-00001",
        "model-2.index",
        "model-3.data-00000-of-00001",
        "model-3.index",
    ]


def test_finding_checkpoints_where_there_are_none(tmp_path: Path) -> None:
    assert tf.train.get_checkpoint_state(str(tmp_path / "nowhere")) is None
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    # a state file whose checkpoint's files are gone
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "gone-1"\n')
    assert (
        tf.train.get_checkpoint_state(str(tmp_path)).model_checkpoint_path == f"{tmp_path}/gone-1"
    )
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    (tmp_path / "checkpoint").write_text("all_model_checkpoint_paths: 'x'\n")
    with pytest.raises(ValueError, match="Invalid checkpoint state loaded from"):
        tf.train.get_checkpoint_state(str(tmp_path))
    (tmp_path / "checkpoint").write_text("not a text proto {")
    assert tf.train.get_checkpoint_state(str(tmp_path)) is None
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file or checkpoints"):
        tf.train.load_checkpoint(str(tmp_path))
    with pytest.raises(errors.NotFoundError, match="Failed to find any matching files for"):
        tf.train.load_checkpoint(str(tmp_path / "model-9"))


# --- errors, as TensorFlow's ---


def test_no_variables_is_a_value_error_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="No variables to save"):
        tf.train.Saver()
    with pytest.raises(ValueError, match="No variables to save"):
        tf.train.Saver([])
    empty = tf.train.Saver(allow_empty=True)
    with tf.Session() as sess:
        assert empty.save(sess, str(tmp_path / "m")) is None
        assert empty.restore(sess, str(tmp_path / "m")) is None
    assert os.listdir(tmp_path) == []


def test_bad_var_lists_are_refused() -> None:
    v = tf.Variable(1.0, name="v")
    with pytest.raises(ValueError, match="At least two variables have the same name: v"):
        tf.train.Saver([v, v])
    with pytest.raises(TypeError, match="Variable to save is not a Variable"):
        tf.train.Saver([tf.constant(1.0)])
    with pytest.raises(TypeError, match="must be a dict mapping string names"):
        tf.train.Saver({"x": 3})


def test_restore_errors(tmp_path: Path) -> None:
    a = tf.Variable([1.0, 2.0], name="a")
    saver = tf.train.Saver([a])
    with tf.Session() as sess:
        sess.run(a.initializer)
        saved = saver.save(sess, str(tmp_path / "m"))
        with pytest.raises(ValueError, match="The passed save_path is not a valid checkpoint: "):
            saver.restore(sess, str(tmp_path / "other"))
        with pytest.raises(ValueError, match="Can't load save_path when it is None."):
            saver.restore(sess, None)
    missing = tf.Variable(1.0, name="missing")
    with tf.Session() as sess, pytest.raises(errors.NotFoundError) as found:
        tf.train.Saver([a, missing]).restore(sess, saved)
    assert str(found.value).startswith(
        "Restoring from checkpoint failed. This is most likely due to a Variable name or other "
        "graph key that is missing from the checkpoint."
    )
    assert "Key missing not found in checkpoint" in str(found.value)
    other = tf.Graph()
    with other.as_default():
        as_int = tf.Variable([0, 0], name="a")
        with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError) as mismatch:
            tf.train.Saver().restore(sess, saved)
        assert "This is most likely due to a mismatch between the current graph" in str(
            mismatch.value
        )
        assert "tensor_name = a; expected dtype int32 does not equal original dtype float" in str(
            mismatch.value
        )
        # nothing was assigned
        with tf.Session() as sess, pytest.raises(errors.FailedPreconditionError):
            sess.run(as_int)


def test_restoring_another_shape_takes_the_checkpoints_as_tensorflow_does(tmp_path: Path) -> None:
    a = tf.Variable(np.zeros((2, 3), np.float32), name="a")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(a.initializer)
        saved = saver.save(sess, str(tmp_path / "m"))
    with tf.Graph().as_default():
        wider = tf.Variable(np.ones((3, 3), np.float32), name="a")
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, saved)
            assert sess.run(wider).shape == (2, 3)


def test_save_errors(tmp_path: Path) -> None:
    tf.Variable(1.0)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(ValueError, match="Parent directory of .* doesn't exist, can't save."):
            saver.save(sess, str(tmp_path / "no" / "such" / "model"))
        with pytest.raises(ValueError, match="'latest_filename' must not contain path components"):
            saver.save(sess, str(tmp_path / "m"), latest_filename="a/b")
        with pytest.raises(ValueError, match="'latest_filename' collides with 'save_path'"):
            saver.save(sess, str(tmp_path / "checkpoint"))
        with pytest.raises(TypeError, match="'sess' must be a Session; notasession"):
            saver.save("notasession", str(tmp_path / "m"))
    assert os.listdir(tmp_path) == []
    deferred = tf.train.Saver(defer_build=True)
    with pytest.raises(RuntimeError, match="`build\\(\\)` should be called before save"):
        deferred.save(None, str(tmp_path / "m"))


def test_damaged_files_are_data_loss(tmp_path: Path) -> None:
    prefix = str(tmp_path / "m")
    write_checkpoint(prefix, {"x": (np.arange(4.0), tf.float64)})
    data = Path(prefix + ".data-00000-of-00001")
    data.write_bytes(b"\x01" + data.read_bytes()[1:])
    with pytest.raises(errors.DataLossError, match="Checksum does not match"):
        CheckpointReader(prefix).tensor("x")
    data.write_bytes(data.read_bytes()[:-1])
    with pytest.raises(errors.DataLossError, match="Checkpoint data for x is truncated"):
        CheckpointReader(prefix).tensor("x")
    # a value read is the reader's own: changing it changes nothing stored
    write_checkpoint(prefix, {"x": (np.arange(4.0), tf.float64)})
    value = CheckpointReader(prefix).get_tensor("x")
    value[0] = 99.0
    assert CheckpointReader(prefix).get_tensor("x").tolist() == [0.0, 1.0, 2.0, 3.0]
    index = Path(prefix + ".index")
    flipped = bytearray(index.read_bytes())
    flipped[5] ^= 0xFF
    index.write_bytes(bytes(flipped))
    with pytest.raises(errors.DataLossError, match="block checksum mismatch"):
        CheckpointReader(prefix)
    index.write_bytes(b"garbage" * 20)
    with pytest.raises(errors.DataLossError, match="not an sstable \\(bad magic number\\)"):
        CheckpointReader(prefix)


# --- with TensorFlow ---


def test_tensorflows_checkpoint_restores_in_tf_accum(tmp_path: Path) -> None:
    made = _variables(VARIABLES)
    folder = tmp_path / "from_tensorflow"
    shutil.copytree(FIXTURE, folder)
    path = tf.train.latest_checkpoint(str(folder))
    assert path == f"{folder}/model-{STEP}"
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, path)
        for name, variable in made.items():
            assert _same(sess.run(variable), VARIABLES[name]), name
    assert tf.train.load_checkpoint(path).get_tensor("label") == b"tf_accum"


def test_tf_accum_writes_the_bytes_tensorflow_writes(tmp_path: Path) -> None:
    _variables(VARIABLES)
    saver = tf.train.Saver(save_relative_paths=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(tmp_path / "model"), global_step=STEP)
    for name in sorted(os.listdir(FIXTURE)):
        assert (tmp_path / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    assert sorted(os.listdir(tmp_path)) == sorted(os.listdir(FIXTURE))


def test_tf_accum_writes_tensorflows_table_layout_across_many_blocks(tmp_path: Path) -> None:
    # an index over 256 KiB spans several blocks, each found through the index block
    tensors = {
        f"layer{i:04d}/" + "w" * 100: (np.full(2, i, np.int32), tf.int32) for i in range(3000)
    }
    write_checkpoint(str(tmp_path / "m"), tensors)
    assert (tmp_path / "m.index").stat().st_size > 2 * 262144 // 2
    reader = CheckpointReader(str(tmp_path / "m"))
    assert reader.names() == sorted(tensors)
    assert reader.tensor("layer2999/" + "w" * 100).tolist() == [2999, 2999]


# TensorFlow reading tf_accum's checkpoint and writing its own, in a child process
_LIVE_JOB = live_job(
    "checkpoints: TensorFlow reads tf_accum's and writes its own",
    "tests.graph.tensorflow_checkpoint",
    "check",
)


@pytest.mark.background(_LIVE_JOB)
def test_tensorflow_reads_and_restores_tf_accums_checkpoint_and_writes_the_fixture() -> None:
    outcome = last_json_line(live_result(_LIVE_JOB, "the fixture tests cover it"))
    wanted = {name: as_json(value) for name, value in VARIABLES.items()}
    assert outcome["read"] == {"path": "model-7", "loaded": wanted, "restored": wanted}
    # and TensorFlow today writes what the fixture holds
    assert outcome["written"] == {
        name: base64.b64encode((FIXTURE / name).read_bytes()).decode()
        for name in sorted(os.listdir(FIXTURE))
    }
