"""Runnable examples of the patterns tf_accum serves."""
