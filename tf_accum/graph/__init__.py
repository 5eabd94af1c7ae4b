"""TF1 graph mode: ops built into a Graph, run later by a Session.

The public names live in ``tf_accum.compat.v1``; this package is their
implementation: ``mode`` (eager or graph, per thread), ``graph`` (Graph,
Operation, Tensor), ``ops`` and ``variables`` (what programs build beside
their accumulators), ``raw_op_nodes`` (raw ops as graph nodes), ``session``,
``executor`` and ``fetches`` (running), ``protos`` (option messages).
"""
