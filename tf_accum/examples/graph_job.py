"""The synchronous-replicas job written the TensorFlow 1 way (``--graph``).

The same training as the eager job (same models, data, simulated speeds and
accounting), but every accumulator and weights operation is a graph op built
through ``tf_accum.compat.v1`` inside ``with tf.Graph().as_default():`` (so
the process's eager mode is left alone): placeholders for the gradient (or
its indices and values) and the local step, the weights in a ``Variable``
with the global step, worker threads calling ``Session.run`` on one session,
and the chief taking with a ``RunOptions`` timeout. The models' numpy code
computes the gradients and the update; the graph only moves them, as it must
on tf_accum, which has no math or autodiff.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from tf_accum import errors
from tf_accum.examples.models import MODELS, Model, simulate_compute
from tf_accum.examples.records import RunResult, StepRecord
from tf_accum.examples.workers import Ledger, ParameterServer, start_worker_threads

if TYPE_CHECKING:
    from tf_accum.examples.config import JobConfig
    from tf_accum.examples.progress import Progress


def run_graph(config: JobConfig, progress: Progress) -> RunResult:
    """:func:`tf_accum.examples.sync_replicas.run` for ``config.graph``.

    Raises:
        Whatever a worker raised, if one failed; the chief's ``Session.run`` errors.
    """
    import tf_accum.compat.v1 as tf

    model: Model = MODELS["sparse" if config.sparse else "dense"](config.seed, config.workers)
    with tf.Graph().as_default():
        return _train(tf, config, model, progress)


def _train(tf: Any, config: JobConfig, model: Model, progress: Progress) -> RunResult:
    initial = model.initial_params()
    # --- the graph ---
    weights = tf.Variable(initial, name="weights")
    global_step = tf.train.get_or_create_global_step()
    step_ph = tf.placeholder(tf.int64, shape=[], name="local_step")
    accumulator = model.make_accumulator()  # a graph op here: built into the default graph
    if model.name == "dense":
        gradient_ph = tf.placeholder(tf.float32, shape=[initial.size + 1], name="gradient")
        apply_op = accumulator.apply_grad(gradient_ph, local_step=step_ph)

        def feed(gradient: Any, step: int) -> dict[Any, Any]:
            return {gradient_ph: gradient, step_ph: step}

    else:
        indices_ph = tf.placeholder(tf.int64, shape=[None], name="indices")
        values_ph = tf.placeholder(tf.float32, shape=[None, initial.shape[1]], name="values")
        apply_op = accumulator.apply_grad(indices_ph, values_ph, local_step=step_ph)

        def feed(gradient: Any, step: int) -> dict[Any, Any]:
            return {indices_ph: gradient.indices, values_ph: gradient.values, step_ph: step}

    take_op = accumulator.take_grad(config.replicas_to_aggregate)
    new_weights_ph = tf.placeholder(tf.float32, shape=initial.shape, name="new_weights")
    update_op = tf.group(weights.assign(new_weights_ph), global_step.assign_add(1))

    # --- running it ---
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    # only wakes the workers at each new step: they read the weights with Session.run
    # (it never publishes a step again, so its versions are the steps)
    steps = ParameterServer(np.zeros(0, np.float32))
    ledger = Ledger()
    failures: list[BaseException] = []

    def work(index: int) -> None:
        seen = -1
        while steps.read_after(seen) is not None:
            params, step = sess.run([weights, global_step])
            step = int(step)
            gradient = model.gradient(params, index, step)
            simulate_compute(config.seed, index, step, config.compute_ms)
            ledger.add(step, 1)
            # refused (the session closed at the end, or a real error, which the
            # run reports): it stays counted, as one dropped, since the chief
            # may have counted it stale already
            sess.run(apply_op, feed_dict=feed(gradient, step))
            seen = step

    options = tf.RunOptions(timeout_in_ms=int(1000 * config.take_timeout))
    initial_loss = model.loss(initial)
    records: list[StepRecord] = []
    started = time.perf_counter()
    # a failing worker closes the session: that cancels the chief's take
    threads = start_worker_threads(config.workers, work, failures, sess.close)
    accepted_so_far = stale_so_far = 0
    try:
        for _ in range(config.steps):
            before = time.perf_counter()
            try:
                taken = sess.run(take_op, options=options)
            except errors.OpError:
                if failures:
                    raise failures[0] from None
                raise
            waited = time.perf_counter() - before
            total, count = model.unpack(taken)
            params = sess.run(weights)
            model.update(params, total, count)
            sess.run(update_op, feed_dict={new_weights_ph: params})
            step = steps.update(lambda _: None)
            accepted_so_far += count
            # as the thread job: the rounds up to this step are closed
            stale_now = ledger.up_to(step - 1) - accepted_so_far
            records.append(
                StepRecord(step, model.loss(params), count, stale_now - stale_so_far, waited)
            )
            stale_so_far = stale_now
            progress.update(records[-1])
    finally:
        steps.stop()  # each worker ends after its current apply (applies never block)
        for thread in threads:
            thread.join(timeout=config.take_timeout)
        sess.close()
        progress.close()
    if failures:
        raise failures[0]
    return RunResult(
        workers=config.workers,
        replicas_to_aggregate=config.replicas_to_aggregate,
        model_description=model.description + " (TF1 graph mode)",
        initial_loss=initial_loss,
        records=records,
        applied=ledger.total(),
        seconds=time.perf_counter() - started,
        worker_kind=config.worker_kind,
    )
