"""``tf.app.flags``, ``tf.app.run`` and ``tf.logging`` as TF1 programs use them.

The flags are absl's (as TensorFlow's are); what TensorFlow 2.21 does was
seen by running the same programs against ``tensorflow.compat.v1``:
reading a flag before any parse parses ``sys.argv`` (an unknown flag then
raises absl's UnrecognizedFlagError), ``app.run`` leaves unknown flags in the
``argv`` main gets, the TF1 argument names ``flag_name``/``default_value``/
``docstring`` still work. Each program runs in a child process, since absl's
flags are global to a process.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tf_accum.compat.v1 as tf

ROOT = Path(__file__).resolve().parent.parent
CHILD_TIMEOUT = 120  # seconds

PROGRAM = """
import sys
import tf_accum.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_integer("task_index", 0, "Index of the task within its job")
flags.DEFINE_string("job_name", "worker", "ps or worker")
flags.DEFINE_boolean("sync_replicas", False, "Synchronous training")
flags.DEFINE_float("learning_rate", 0.01, "Learning rate")
tf.flags.DEFINE_integer(flag_name="old_style", default_value=5, docstring="TF1 names")
FLAGS = flags.FLAGS
"""


def run_program(body: str, *argv: str) -> subprocess.CompletedProcess[str]:
    code = PROGRAM + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )


def test_reading_a_flag_parses_the_command_line() -> None:
    done = run_program(
        """
        print(FLAGS.task_index, FLAGS.job_name, FLAGS.sync_replicas, FLAGS.learning_rate,
              FLAGS.old_style)
        """,
        "--task_index=3",
        "--job_name=ps",
        "--sync_replicas",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "ps", "True", "0.01", "5"]
    # the TF1 argument names work, with a warning
    assert "flag_name, default_value, docstring" in done.stderr


def test_reading_a_flag_with_an_unknown_one_on_the_command_line_fails() -> None:
    done = run_program(
        """
        from absl import flags as absl_flags
        try:
            FLAGS.task_index
        except absl_flags.UnrecognizedFlagError as error:
            print("refused:", error)
        """,
        "--task_index=3",
        "--bogus=1",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused: Unknown command line flag 'bogus'"


def test_app_run_parses_known_flags_and_hands_the_rest_to_main() -> None:
    done = run_program(
        """
        def main(argv):
            print(argv[1:])
            print(FLAGS.task_index, FLAGS.sync_replicas, FLAGS.learning_rate)

        tf.app.run()
        """,
        "--task_index=2",
        "--nosync_replicas",
        "--learning_rate",
        "0.5",
        "--bogus=1",
        "extra",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['--bogus=1', 'extra']", "2 False 0.5"]


def test_app_run_exits_with_mains_status_and_refuses_bad_values() -> None:
    done = run_program(
        """
        tf.app.run(main=lambda argv: 3)
        """,
    )
    assert done.returncode == 3, done.stderr
    bad = run_program("tf.app.run(main=lambda argv: 0)", "--task_index=x")
    assert bad.returncode == 1
    assert "IllegalFlagValueError: flag --task_index=x" in bad.stderr


def test_the_flags_are_absls_and_load_only_when_used() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys
                import tf_accum.compat.v1 as tf
                tf.logging.info("no absl for logging")
                print("absl" in sys.modules)
                from absl import flags as absl_flags
                assert tf.flags is tf.app.flags
                tf.flags.DEFINE_integer("n", 1, "a number")
                tf.flags.FLAGS(["prog", "--n=7"])
                print(absl_flags.FLAGS.n, tf.flags.FLAGS.n, "n" in tf.flags.FLAGS)
                tf.flags.FLAGS.n = 8
                print(absl_flags.FLAGS.n, tf.flags.mark_flag_as_required is not None)
                """
            ),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False", "7 7 True", "8 True"]


def test_logging_levels_are_tensorflows() -> None:
    assert (tf.logging.DEBUG, tf.logging.INFO, tf.logging.WARN) == (10, 20, 30)
    assert (tf.logging.ERROR, tf.logging.FATAL) == (40, 50)


def test_logging_goes_to_the_program_logger(caplog: pytest.LogCaptureFixture) -> None:
    before = tf.logging.get_verbosity()
    try:
        tf.logging.set_verbosity(tf.logging.INFO)
        assert tf.logging.get_verbosity() == logging.INFO
        with caplog.at_level(logging.DEBUG, logger="tf_accum.program"):
            tf.logging.set_verbosity(tf.logging.INFO)
            tf.logging.debug("hidden")
            tf.logging.info("step %d", 3)
            tf.logging.warn("warn %s", "a")
            tf.logging.warning("warning")
            tf.logging.error("error")
            tf.logging.fatal("fatal")  # logs, and the program goes on, as in TensorFlow
            tf.logging.vlog(1, "below INFO: hidden")
            tf.logging.vlog(20, "vlog at INFO")
            tf.logging.log(tf.logging.INFO, "log %s", "x")
            tf.logging.log_if(tf.logging.INFO, "if %d", False, 1)
            tf.logging.log_if(tf.logging.INFO, "if %d", True, 2)
            for i in range(5):
                tf.logging.log_every_n(tf.logging.INFO, "every %d", 2, i)
                tf.logging.log_first_n(tf.logging.INFO, "first %d", 2, i)
        records = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
        assert {name for name, _, _ in records} == {"tf_accum.program"}
        assert [(level, message) for _, level, message in records] == [
            ("INFO", "step 3"),
            ("WARNING", "warn a"),
            ("WARNING", "warning"),
            ("ERROR", "error"),
            ("CRITICAL", "fatal"),
            ("INFO", "vlog at INFO"),
            ("INFO", "log x"),
            ("INFO", "if 2"),
            ("INFO", "every 0"),
            ("INFO", "first 0"),
            ("INFO", "first 1"),
            ("INFO", "every 2"),
            ("INFO", "every 4"),
        ]
    finally:
        tf.logging.set_verbosity(before)


def test_logging_prints_to_stderr_when_nothing_is_configured() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import tf_accum.compat.v1 as tf
                tf.logging.info("not shown: below the default WARN")
                tf.logging.warn("shown %d", 1)
                tf.logging.set_verbosity(tf.logging.INFO)
                tf.logging.info("shown %d", 2)
                """
            ),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "WARNING:tf_accum.program:shown 1",
        "INFO:tf_accum.program:shown 2",
    ]


def _run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )


def test_set_verbosity_covers_the_librarys_own_lines() -> None:
    """One ``set_verbosity(INFO)`` shows the program's INFO lines and tf_accum's
    (here SyncReplicasOptimizer's stale-gradient lines), as TensorFlow's one
    logger does; the root logger is left as it was."""
    done = _run_child(
        """
        import logging
        import tf_accum.compat.v1 as tf
        from tests.graph import sync_replicas_program as program
        root = logging.getLogger()
        before = (root.level, list(root.handlers))
        logging.getLogger("tf_accum").info("not shown: below the default WARN")
        tf.logging.set_verbosity(tf.logging.INFO)
        tf.logging.info("program line")
        logging.getLogger("tf_accum.graph.saver").info("module line")
        found = program.run(tf, "backup", timeout=60)
        assert found["stale_gradients"] == program.STEPS - 1, found["stale_gradients"]
        print(found["stale_gradients"])
        assert (root.level, list(root.handlers)) == before
        tf.logging.set_verbosity(tf.logging.WARN)
        logging.getLogger("tf_accum").info("not shown: WARN again")
        tf.logging.info("not shown either")
        """
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[:2] == [
        "INFO:tf_accum.program:program line",
        "INFO:tf_accum.graph.saver:module line",
    ]
    dropped = [line for line in lines if "stale gradient(s) dropped" in line]
    assert len(dropped) == int(done.stdout) > 0  # a line per take that dropped one
    assert all(line.startswith("INFO:tf_accum:SyncReplicasOptimizer: 1 stale") for line in dropped)
    # the constructor's line, in TensorFlow's words: one per worker's optimizer
    assert [line for line in lines if line.startswith("INFO:tf_accum:SyncReplicasV2: ")] == 3 * [
        "INFO:tf_accum:SyncReplicasV2: replicas_to_aggregate=2; total_num_replicas=3"
    ]
    assert not [line for line in lines if "not shown" in line]


def test_set_verbosity_adds_no_handler_to_a_configured_program() -> None:
    """A program that configured ``logging`` first gets each line once, through its handler."""
    done = _run_child(
        """
        import logging, sys
        logging.basicConfig(stream=sys.stderr, format="mine %(name)s %(message)s")
        import tf_accum.compat.v1 as tf
        tf.logging.set_verbosity(tf.logging.INFO)
        tf.logging.info("program")
        logging.getLogger("tf_accum").info("library")
        assert not logging.getLogger("tf_accum").handlers
        assert not logging.getLogger("tf_accum.program").handlers
        assert logging.getLogger().level == logging.WARNING
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["mine tf_accum.program program", "mine tf_accum library"]


def test_set_verbosity_sets_the_package_logger_in_process() -> None:
    package, program = logging.getLogger("tf_accum"), logging.getLogger("tf_accum.program")
    saved = (package.level, program.level)
    try:
        tf.logging.set_verbosity(tf.logging.DEBUG)
        assert logging.getLogger("tf_accum.graph.saver").isEnabledFor(logging.DEBUG)
        assert tf.logging.get_verbosity() == logging.DEBUG
        tf.logging.set_verbosity(tf.logging.ERROR)
        assert not package.isEnabledFor(logging.WARNING)
        assert tf.logging.get_verbosity() == logging.ERROR
    finally:
        package.setLevel(saved[0])
        program.setLevel(saved[1])


def test_v2_behavior_switches_and_old_initializer_names() -> None:
    assert tf.executing_eagerly()
    tf.disable_v2_behavior()
    try:
        assert not tf.executing_eagerly()
        with tf.Graph().as_default():
            v = tf.Variable(1.0)
            local = tf.Variable(2.0, collections=[tf.GraphKeys.LOCAL_VARIABLES])
            init_all = tf.initialize_all_variables()
            init_local = tf.initialize_local_variables()
            with tf.Session() as sess:
                sess.run([init_all, init_local])
                assert sess.run([v, local]) == [1.0, 2.0]
    finally:
        tf.enable_v2_behavior()
    assert tf.executing_eagerly()
