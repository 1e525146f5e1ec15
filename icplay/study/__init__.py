"""Human baseline studies: a study file (who plays which tasks, under which rules), each
annotator's queue, their status, and merging trajectories made on other machines.

``model`` (the Study and its rules, the TOML file), ``assign`` (balanced, seeded
assignment), ``rules`` (what the rules allow, asked by every front end), ``queue`` (an
annotator's next task, progress and time, derived from the saved trajectories),
``status`` and ``merge``. docs/studies.md walks a study lead through them.
"""
