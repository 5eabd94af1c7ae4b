"""``python -m tf_accum``: the synchronous-replicas job (``--help`` lists its options)."""

from __future__ import annotations

from tf_accum.examples.sync_replicas import main

if __name__ == "__main__":
    main()
