"""``python -m tf_accum``: run the synchronous-replicas example."""

from __future__ import annotations

from tf_accum.examples.sync_replicas import main

if __name__ == "__main__":
    main()
