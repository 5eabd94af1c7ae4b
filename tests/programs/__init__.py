"""TF1 parameter-server programs written as public ones are, run on tf_accum and TensorFlow.

Each program is plain TF1 code (``tf.app.flags``, one process per task); its
import line is the only thing the runner (``runner.py``) changes to run it on
TensorFlow 2.21.
"""
