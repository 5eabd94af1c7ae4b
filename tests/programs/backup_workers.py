"""Synchronous training with a backup worker: SyncReplicasOptimizer with
``total_num_replicas`` above ``replicas_to_aggregate``.

One process per task: ``--job_name=ps|worker --task_index=I --ps_hosts=...
--worker_hosts=...``. Each step aggregates the first ``--replicas_to_aggregate``
gradients of the step; the last worker is slow (it waits for the global step
to move on before each of its steps), so every gradient it sends is stale and
dropped. The chief starts the queue runner and runs the initial tokens' op
by hand; with no initial tokens, no replica can make steps on its own, so the
fast replicas share the steps (with TensorFlow's default of
``replicas_to_aggregate`` tokens, the chief alone makes every step when it
starts first). Which fast replica's gradients make each step depends on
timing. Each worker prints one JSON line.
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
flags.DEFINE_integer("replicas_to_aggregate", 2, "gradients aggregated per step")
flags.DEFINE_integer("train_steps", 8, "global steps to train")
flags.DEFINE_float("wait_secs", 60, "how long the slow worker waits for a step at most")
FLAGS = flags.FLAGS

FEATURES, BATCH = 4, 16


def worker_data(task):
    """The worker's examples of a linear function (its own share, the same every step)."""
    rng = np.random.default_rng(400 + task)
    x = np.round(rng.normal(size=(BATCH, FEATURES)) * 4) / 4
    y = x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.25
    return x.astype(np.float32), y.astype(np.float32)


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
    is_slow = FLAGS.task_index == num_workers - 1
    with tf.device(
        tf.train.replica_device_setter(
            worker_device=f"/job:worker/task:{FLAGS.task_index}", cluster=cluster
        )
    ):
        global_step = tf.Variable(0, name="global_step", trainable=False, dtype=tf.int64)
        w = tf.Variable(tf.zeros([FEATURES, 1]), name="w")
        b = tf.Variable(0.0, name="b")
        xs, ys = worker_data(FLAGS.task_index)
        prediction = tf.reshape(tf.matmul(tf.constant(xs), w), [-1]) + b
        loss = tf.reduce_mean(tf.square(prediction - tf.constant(ys)))
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(0.1),
            replicas_to_aggregate=FLAGS.replicas_to_aggregate,
            total_num_replicas=num_workers,
        )
        train_op = opt.minimize(loss, global_step=global_step)
        local_init_op = opt.chief_init_op if is_chief else opt.local_step_init_op
        init_tokens_op = opt.get_init_tokens_op(num_tokens=0)
        chief_queue_runner = opt.get_chief_queue_runner()
        init_op = tf.global_variables_initializer()

    sv = tf.train.Supervisor(
        is_chief=is_chief,
        init_op=init_op,
        local_init_op=local_init_op,
        ready_for_local_init_op=opt.ready_for_local_init_op,
        recovery_wait_secs=1,
        global_step=global_step,
    )
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{FLAGS.task_index}"])
    sess = sv.prepare_or_wait_for_session(server.target, config=config)
    print(f"Worker {FLAGS.task_index}: Session initialization complete.", flush=True)
    if is_chief:
        sess.run(init_tokens_op)
        sv.start_queue_runners(sess, [chief_queue_runner])

    losses: list[float] = []
    step = sess.run(global_step)
    while step < FLAGS.train_steps:
        if is_slow:
            # a slow machine: by the time its gradient arrives, the step has moved on
            give_up = time.monotonic() + FLAGS.wait_secs
            seen = step
            while step == seen:
                if time.monotonic() > give_up:
                    raise RuntimeError(f"the global step stayed at {seen}")
                time.sleep(0.01)
                step = sess.run(global_step)
            if step >= FLAGS.train_steps:
                break
        _, loss_value = sess.run([train_op, loss])
        losses.append(float(loss_value))
        step = sess.run(global_step)
    final_loss, values = sess.run([loss, {"w": w, "b": b}])
    outcome = {
        "task": FLAGS.task_index,
        "global_step": int(step),
        "runs": len(losses),
        "losses": losses,
        "final_loss": float(final_loss),
        "variables": {name: np.asarray(value).tolist() for name, value in values.items()},
    }
    if is_chief:
        # tf_accum's counts (TensorFlow's optimizer has none)
        outcome["stale_gradients"] = getattr(opt, "stale_gradients", None)
        outcome["steps_aggregated"] = getattr(opt, "steps_aggregated", None)
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    tf.app.run()
