"""Synchronous training of an embedding model: sparse gradients through SyncReplicasOptimizer.

One process per task: ``--job_name=ps|worker --task_index=I --ps_hosts=...
--worker_hosts=...``. Each example is a bag of word ids; the model sums
their rows of an embedding table held on a ps task
(``tf.nn.embedding_lookup``), so the table's gradient is an
``IndexedSlices`` and SyncReplicasOptimizer aggregates it in a
SparseConditionalAccumulator; Adagrad updates only the rows seen.
MonitoredTrainingSession runs the optimizer's hook and StopAtStepHook; a hook
of the program's reads the variables when the session ends. With no initial tokens, each worker computes one
gradient per step from that step's weights: the losses and the final weights
are the same on every run. Each worker prints one JSON line.
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
flags.DEFINE_integer("train_steps", 4, "global steps to train")
flags.DEFINE_bool("repeated_ids", False, "batches whose ids repeat and are in no order")
FLAGS = flags.FLAGS
STOP_GRACE_PERIOD_SECS = 30  # how long closing the session waits for the queue runner

VOCABULARY, DIMENSION, WORDS, BATCH = 40, 4, 3, 6


def worker_batches(task, steps, repeated_ids=False):
    """The worker's batches, one per step: word ids and 0/1 labels.

    A batch's ids are distinct and in increasing order unless ``repeated_ids``:
    TensorFlow's sparse accumulator merges the gradients' rows as if their
    indices were sorted and unique (and gives wrong sums otherwise; tf_accum
    sums them, departure T5), so only such batches give the two the same results.
    """
    rng = np.random.default_rng(300 + task)
    if repeated_ids:
        ids = rng.integers(0, VOCABULARY // 4, size=(steps, BATCH, WORDS))
    else:
        ids = np.stack(
            [np.sort(rng.choice(VOCABULARY, BATCH * WORDS, replace=False)) for _ in range(steps)]
        ).reshape(steps, BATCH, WORDS)
    labels = (ids.sum(axis=-1) % 2).astype(np.float32)
    return ids.astype(np.int64), labels


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
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        embeddings = tf.get_variable(
            "embeddings",
            [VOCABULARY, DIMENSION],
            initializer=tf.random_uniform_initializer(-0.5, 0.5, seed=5),
        )
        weights = tf.get_variable(
            "weights", [DIMENSION, 1], initializer=tf.truncated_normal_initializer(seed=6)
        )
        bias = tf.get_variable("bias", [1], initializer=tf.zeros_initializer())
        ids = tf.placeholder(tf.int64, [None, WORDS], name="ids")
        labels = tf.placeholder(tf.float32, [None], name="labels")
        bag = tf.reduce_sum(tf.nn.embedding_lookup(embeddings, ids), axis=1)
        logits = tf.reshape(tf.matmul(bag, weights) + bias, [-1])
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.AdagradOptimizer(0.5),
            replicas_to_aggregate=num_workers,
            total_num_replicas=num_workers,
        )
        train_op = opt.minimize(loss, global_step=global_step)

    final = FinalValues(
        {"embeddings": embeddings, "weights": weights, "bias": bias, "step": global_step}
    )
    hooks = [
        opt.make_session_run_hook(is_chief, num_tokens=0),
        tf.train.StopAtStepHook(last_step=FLAGS.train_steps),
        final,
    ]
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{FLAGS.task_index}"])
    batches, targets = worker_batches(FLAGS.task_index, FLAGS.train_steps, FLAGS.repeated_ids)
    losses: list[float] = []
    initial = None
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        hooks=hooks,
        config=config,
        stop_grace_period_secs=STOP_GRACE_PERIOD_SECS,
    ) as sess:
        print(f"Worker {FLAGS.task_index}: Session initialization complete.", flush=True)
        if is_chief and FLAGS.repeated_ids:
            # no step is made before the chief's first gradient
            initial = sess.run({"embeddings": embeddings, "weights": weights, "bias": bias})
        while not sess.should_stop():
            feed = {ids: batches[len(losses)], labels: targets[len(losses)]}
            _, loss_value = sess.run([train_op, loss], feed_dict=feed)
            losses.append(float(loss_value))
        closing = time.monotonic()
    values = final.values
    step = int(values.pop("step"))
    outcome = {"task": FLAGS.task_index, "global_step": step, "losses": losses}
    outcome["close_secs"] = time.monotonic() - closing
    outcome["variables"] = {name: value.tolist() for name, value in values.items()}
    if FLAGS.repeated_ids:
        outcome["batches"] = {"ids": batches.tolist(), "labels": targets.tolist()}
    if initial is not None:
        outcome["initial"] = {name: value.tolist() for name, value in initial.items()}
    if is_chief:
        outcome["stop_grace_period_secs"] = STOP_GRACE_PERIOD_SECS
        # tf_accum's counts (TensorFlow's optimizer has none)
        outcome["stale_gradients"] = getattr(opt, "stale_gradients", None)
        outcome["steps_aggregated"] = getattr(opt, "steps_aggregated", None)
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    tf.app.run()
