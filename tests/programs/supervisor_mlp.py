"""Synchronous MLP training with tf.train.Supervisor and SyncReplicasOptimizer.

One process per task: ``--job_name=ps|worker --task_index=I --ps_hosts=...
--worker_hosts=...``. Every worker's gradient of a step is aggregated (the
mean of all of them), the chief runs the chief's queue runner and puts the
initial tokens in by hand. With no initial tokens, each worker computes one
gradient per step from that step's weights, so the losses and the final
weights are the same on every run. Each worker prints one JSON line.
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
flags.DEFINE_float("learning_rate", 0.5, "learning rate")
FLAGS = flags.FLAGS
STOP_GRACE_SECS = 10  # how long Supervisor.stop() waits for the threads to end

FEATURES, HIDDEN, CLASSES, BATCH = 6, 8, 3, 8


def worker_batches(task, steps):
    """The worker's batches, one per step: features on a grid of quarters, one-hot labels."""
    rng = np.random.default_rng(100 + task)
    x = np.round(rng.normal(size=(steps, BATCH, FEATURES)) * 4) / 4
    labels = (x[..., 0] + x[..., 1] > 0).astype(np.int64) + (x[..., 2] > 0.5)
    return x.astype(np.float32), np.eye(CLASSES, dtype=np.float32)[labels]


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    is_chief = FLAGS.task_index == 0
    num_workers = len(worker_hosts)
    worker_device = f"/job:worker/task:{FLAGS.task_index}/cpu:0"
    with tf.device(tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        global_step = tf.Variable(0, name="global_step", trainable=False)
        hid_w = tf.Variable(
            tf.truncated_normal([FEATURES, HIDDEN], stddev=0.5, seed=1), name="hid_w"
        )
        hid_b = tf.Variable(tf.zeros([HIDDEN]), name="hid_b")
        sm_w = tf.Variable(tf.truncated_normal([HIDDEN, CLASSES], stddev=0.5, seed=2), name="sm_w")
        sm_b = tf.Variable(tf.zeros([CLASSES]), name="sm_b")
        x = tf.placeholder(tf.float32, [None, FEATURES])
        y_ = tf.placeholder(tf.float32, [None, CLASSES])
        hid = tf.nn.relu(tf.nn.xw_plus_b(x, hid_w, hid_b))
        logits = tf.nn.xw_plus_b(hid, sm_w, sm_b)
        cross_entropy = tf.reduce_mean(
            tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=logits)
        )
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(FLAGS.learning_rate),
            replicas_to_aggregate=num_workers,
            total_num_replicas=num_workers,
            name="mlp_sync_replicas",
        )
        train_step = opt.minimize(cross_entropy, global_step=global_step)
        local_init_op = opt.chief_init_op if is_chief else opt.local_step_init_op
        ready_for_local_init_op = opt.ready_for_local_init_op
        chief_queue_runner = opt.get_chief_queue_runner()
        sync_init_op = opt.get_init_tokens_op(num_tokens=0)
        init_op = tf.global_variables_initializer()

    sv = tf.train.Supervisor(
        is_chief=is_chief,
        logdir=None,
        init_op=init_op,
        local_init_op=local_init_op,
        ready_for_local_init_op=ready_for_local_init_op,
        recovery_wait_secs=1,
        global_step=global_step,
        stop_grace_secs=STOP_GRACE_SECS,
    )
    sess_config = tf.ConfigProto(
        allow_soft_placement=True,
        log_device_placement=False,
        device_filters=["/job:ps", f"/job:worker/task:{FLAGS.task_index}"],
    )
    sess = sv.prepare_or_wait_for_session(server.target, config=sess_config)
    print(f"Worker {FLAGS.task_index}: Session initialization complete.", flush=True)
    if is_chief:
        sess.run(sync_init_op)
        sv.start_queue_runners(sess, [chief_queue_runner])

    xs, ys = worker_batches(FLAGS.task_index, FLAGS.train_steps)
    losses: list[float] = []
    step = sess.run(global_step)
    while step < FLAGS.train_steps:
        feed = {x: xs[len(losses)], y_: ys[len(losses)]}
        _, loss_value = sess.run([train_step, cross_entropy], feed_dict=feed)
        losses.append(float(loss_value))
        step = sess.run(global_step)
        print(f"Worker {FLAGS.task_index}: step {step} done (loss {loss_value:.4f})")
    values = sess.run({"hid_w": hid_w, "hid_b": hid_b, "sm_w": sm_w, "sm_b": sm_b})
    outcome = {"task": FLAGS.task_index, "global_step": int(step), "losses": losses}
    outcome["variables"] = {name: value.tolist() for name, value in values.items()}
    # the chief's queue runner waits for gradients of a step no worker sends
    stopping = time.monotonic()
    try:
        sv.stop()
        outcome["stop"] = "stopped"
    except RuntimeError as error:
        outcome["stop"] = f"{type(error).__name__}: {error}"
    outcome["stop_secs"] = time.monotonic() - stopping
    if is_chief:
        outcome["stop_grace_secs"] = STOP_GRACE_SECS
        # tf_accum's counts (TensorFlow's optimizer has none)
        outcome["stale_gradients"] = getattr(opt, "stale_gradients", None)
        outcome["steps_aggregated"] = getattr(opt, "steps_aggregated", None)
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    tf.app.run()
