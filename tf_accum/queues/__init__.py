"""Queues in process: TensorFlow's FIFOQueue (``fifo.py``), beside the accumulators."""
