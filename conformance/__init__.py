"""TensorFlow-compatibility suite: the same cases, run against tf_accum and TensorFlow.

Cases are data (``cases/*.cases``); ``case_format`` parses them, ``runner``
plays one against a backend (``backends/``), ``outcomes`` turns what happened
into comparable records, ``golden/`` holds TensorFlow's recorded outcomes and
``tensorflow-xfails.txt`` lists where tf_accum departs from TensorFlow.
"""
