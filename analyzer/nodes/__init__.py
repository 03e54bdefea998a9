"""Several nodes, one story: join the per-input incidents of a multi-node run (docs/multinode.md)."""
