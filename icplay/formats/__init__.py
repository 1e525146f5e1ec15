"""Every trajectory format icplay reads or writes, in one package.

- ``native``: icplay's own trajectory files and run folders (``load_logs``);
- ``intercode``: InterCode's results (``turn_history``) and per-episode logs, read into
  ``RecordedEpisode`` records and written back (``write_results``);
- ``export``: training-data exports (chat, fewshot, preference, intercode, csv).

``report``, ``rescore``, the replay policy and ``export`` all read through here, so a
format is parsed once.
"""

from icplay.formats.native import load_logs, run_label

__all__ = ["load_logs", "run_label"]
