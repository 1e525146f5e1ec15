"""Studies: annotators, assignments, queues, seats (docs/studies.md)."""
