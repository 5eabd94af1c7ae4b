"""TF1 optimizers (``tf.train.AdamOptimizer``, ...), learning-rate schedules and
``ExponentialMovingAverage``: one module each, over the training ops."""
