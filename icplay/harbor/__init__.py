"""Harbor (Terminal-Bench) task folders: icplay's tasks written out as Harbor tasks
(``export``), and Harbor task folders read in as icplay tasks (``load``).

A Harbor task is a folder: ``instruction.md``, ``task.toml``, ``environment/Dockerfile``,
``solution/solve.sh`` for the oracle agent and ``tests/test.sh``, which writes the reward to
``/logs/verifier/reward.txt``. docs/export.md says how icplay maps its languages onto it.
"""
