"""Scanners: flags over saved episodes that point at reward hacks, broken environments and
broken tasks, so that nobody has to read every trajectory.

A scanner is one function over a trajectory returning ``Flag`` records (a kind, the turn,
the evidence). icplay's own live in ``scanners/`` and are named in ``registry.BUILTIN``;
other packages add theirs through the ``icplay.scanners`` entry point group, as languages
and sandboxes do. ``health`` turns every attempt at a task (human and agent) and the gold
check of ``icplay tasks --check`` into one table of tasks that look broken; ``page`` draws
flags and health as a self-contained HTML page; ``model`` is the optional scanner that asks
a model a question with a rubric, within a budget.
"""
