"""``python -m tf_accum.launch``: run a TF1 program as a ps/worker job on this machine.

One command starts every task of a between-graph job, as a cluster manager
did for TensorFlow 1::

    python -m tf_accum.launch --ps 1 --workers 2 train.py -- --steps 100

It joins the Ray cluster named by ``--address`` or ``TF_ACCUM_RAY_ADDRESS``,
or starts a loopback-only one for the job (:mod:`tf_accum.launch.head`); then
starts one process of the program per task with the flags and the
``TF_CONFIG`` variable TF1 programs read, and an equal share of its node's
cores for BLAS/OpenMP threads (:mod:`tf_accum.launch.tasks`,
:mod:`tf_accum.launch.threads`; with ``--spread``, on the cluster's nodes:
:mod:`tf_accum.launch.nodes`), and watches them (:mod:`tf_accum.launch.job`): each output line goes out
prefixed with its task's name, the ps tasks are ended once every worker has
exited, everything is ended when a task fails or the launcher is
interrupted, and the launcher exits with the workers' worst status.
"""
