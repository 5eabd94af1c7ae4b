"""Synchronous MLP training with tf.train.MonitoredTrainingSession and StopAtStepHook.

One process per task: ``--job_name=ps|worker --task_index=I --ps_hosts=...
--worker_hosts=...``. The variables are spread over the ps tasks by
``replica_device_setter``; the optimizer is Momentum inside
SyncReplicasOptimizer, whose hook (``make_session_run_hook``) initialises the
replicas and starts the chief's queue runner; StopAtStepHook ends the
training at ``--train_steps``. The chief writes checkpoints and summaries to
``--train_dir``. With no initial tokens, each worker computes one gradient
per step from that step's weights: the losses and the final weights are the
same on every run. Each worker prints one JSON line.
"""

import json
import time

import numpy as np

import tf_accum.compat.v1 as tf  # the import line the runner swaps

tf.disable_v2_behavior()

flags = tf.app.flags
flags.DEFINE_string("job_name", None, "ps or worker")
flags.DEFINE_integer("task_index", None, "index of the task in its job")
flags.DEFINE_string("ps_hosts", "", "comma-separated host:port of the ps tasks")
flags.DEFINE_string("worker_hosts", "", "comma-separated host:port of the workers")
flags.DEFINE_string("train_dir", None, "where the chief writes checkpoints and summaries")
flags.DEFINE_integer("train_steps", 4, "global steps to train")
FLAGS = flags.FLAGS
STOP_GRACE_PERIOD_SECS = 30  # how long closing the session waits for the queue runner

FEATURES, HIDDEN, CLASSES, BATCH = 5, 6, 4, 10


def worker_batches(task, steps):
    """The worker's batches, one per step: features on a grid of eighths, class labels."""
    rng = np.random.default_rng(200 + task)
    x = np.round(rng.normal(size=(steps, BATCH, FEATURES)) * 8) / 8
    labels = (x[..., 0] > 0).astype(np.int64) * 2 + (x[..., 3] - x[..., 4] > 0)
    return x.astype(np.float32), labels


class FinalValues(tf.train.SessionRunHook):
    """Reads the variables when the session ends (after the last step)."""

    def __init__(self, variables):
        self._variables = variables
        self.values = {}

    def end(self, session):
        self.values = session.run(self._variables)


def main(_):
    cluster = tf.train.ClusterSpec(
        {"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")}
    )
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    is_chief = FLAGS.task_index == 0
    num_workers = cluster.num_tasks("worker")
    with tf.device(
        tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{FLAGS.task_index}", cluster=cluster
        )
    ):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, FEATURES], name="x")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        with tf.variable_scope("hidden"):
            w1 = tf.get_variable(
                "weights", [FEATURES, HIDDEN], initializer=tf.glorot_uniform_initializer(seed=3)
            )
            b1 = tf.get_variable("biases", [HIDDEN], initializer=tf.zeros_initializer())
            hidden = tf.tanh(tf.matmul(x, w1) + b1)
        with tf.variable_scope("softmax"):
            w2 = tf.get_variable(
                "weights",
                [HIDDEN, CLASSES],
                initializer=tf.truncated_normal_initializer(stddev=0.3, seed=4),
            )
            b2 = tf.get_variable("biases", [CLASSES], initializer=tf.constant_initializer(0.1))
            logits = tf.matmul(hidden, w2) + b2
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        tf.summary.scalar("loss", loss)
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.MomentumOptimizer(0.3, momentum=0.9),
            replicas_to_aggregate=num_workers,
            total_num_replicas=num_workers,
        )
        train_op = opt.minimize(loss, global_step=global_step)

    sync_replicas_hook = opt.make_session_run_hook(is_chief, num_tokens=0)
    final = FinalValues(
        {
            "global_step": global_step,
            "hidden/weights": w1,
            "hidden/biases": b1,
            "softmax/weights": w2,
            "softmax/biases": b2,
        }
    )
    hooks = [sync_replicas_hook, tf.train.StopAtStepHook(last_step=FLAGS.train_steps), final]
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{FLAGS.task_index}"])
    xs, ys = worker_batches(FLAGS.task_index, FLAGS.train_steps)
    losses: list[float] = []
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=FLAGS.train_dir if is_chief else None,
        hooks=hooks,
        config=config,
        stop_grace_period_secs=STOP_GRACE_PERIOD_SECS,
    ) as mon_sess:
        print(f"Worker {FLAGS.task_index}: Session initialization complete.", flush=True)
        while not mon_sess.should_stop():
            feed = {x: xs[len(losses)], labels: ys[len(losses)]}
            _, loss_value = mon_sess.run([train_op, loss], feed_dict=feed)
            losses.append(float(loss_value))
        closing = time.monotonic()
    step = int(final.values.pop("global_step"))
    outcome = {"task": FLAGS.task_index, "global_step": step, "losses": losses}
    outcome["close_secs"] = time.monotonic() - closing
    outcome["variables"] = {name: value.tolist() for name, value in final.values.items()}
    if is_chief:
        outcome["stop_grace_period_secs"] = STOP_GRACE_PERIOD_SECS
        # tf_accum's counts (TensorFlow's hook has none)
        outcome["stale_gradients"] = getattr(sync_replicas_hook, "stale_gradients", None)
        outcome["steps_aggregated"] = getattr(sync_replicas_hook, "steps_aggregated", None)
        outcome["checkpoint"] = tf.train.latest_checkpoint(FLAGS.train_dir) is not None
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    tf.app.run()
