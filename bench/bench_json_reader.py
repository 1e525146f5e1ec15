"""What refusing a duplicate key costs icplay's one reader of saved files (issue 28).

JSON leaves a key stated twice to each reader, so ``icplay.json_shape.loads`` refuses it.
An ``object_pairs_hook`` that checks every object costs about half of ``json.loads``'s time
on an object-heavy file; the reader instead compares two counts (the entries the text's
outline writes, the entries the decoded value holds) and reads the text again only when
they differ. Measured here on two 300-turn trajectories (SQL rows as objects, and as
arrays), each figure the best of N runs as a ratio to plain ``json.loads`` of the same text
in this process:

- ``hook``: ``json.loads`` with a Python ``object_pairs_hook`` that checks each object;
- ``duplicate check``: ``loads`` (plain parse + the two counts; the outline made here);
- ``reader, before``: the depth check and ``json.loads`` (issue 28's reader before this);
- ``reader, now``: ``read_json`` (depth and duplicates from one outline) from a file.

Run: ``python bench/bench_json_reader.py [TURNS] [RUNS]``.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path


def trajectory_text(turns: int, rows_as_objects: bool) -> str:
    from icplay.episode import Trajectory, Turn
    from icplay.store import trajectory_json

    rng = random.Random(1)
    made = []
    for t in range(turns):
        rows = [{"id": i, "name": f"n{i}", "v": rng.random()} if rows_as_objects else [i, f"name, [{i}]", rng.random()]
                for i in range(20)]
        info = {"rows": rows, "columns": ["id", "name", "v"], "strict": {"solved": False, "reasons": ["not yet"]},
                "sql": {"kind": "select", "n": 20}}
        made.append(Turn(t, "agent", f"SELECT * FROM t{t} WHERE name = '{{x}}';", "\n".join(f"row {r}, [{r}]" for r in range(20)),
                         exit_code=0, started_at=1.7e9, duration=0.01, reward=0.5, thought="look", info=info))
    return trajectory_json(Trajectory(task={"id": "x", "set": "sql", "env": "sql", "query": "q", "gold": "g"}, env="sql",
                                      sandbox="sqlite", turns=made, status="submitted", reward=1.0, best_reward=1.0))


def best(fn, runs: int) -> float:
    fastest = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        fastest = min(fastest, time.perf_counter() - started)
    return fastest


def checking_hook(pairs):
    made = dict(pairs)
    if len(made) != len(pairs):
        raise ValueError("a key stated twice")
    return made


def figures(text: str, runs: int, folder: Path) -> dict[str, float]:
    from icplay.json_shape import MAX_DEPTH, loads, nesting_depth, read_json

    raw = text.encode()
    path = folder / "ep.json"
    path.write_bytes(raw)
    plain = best(lambda: json.loads(text), runs)
    assert loads(text) == json.loads(text) and read_json(path)[0] == json.loads(text)
    return {
        "plain json.loads (ms)": plain * 1000,
        "hook": best(lambda: json.loads(text, object_pairs_hook=checking_hook), runs) / plain,
        "duplicate check": best(lambda: loads(text), runs) / plain,
        "reader, before": best(lambda: (nesting_depth(raw, MAX_DEPTH), json.loads(raw.decode())), runs) / plain,
        "reader, now": best(lambda: read_json(path), runs) / plain,
    }


def main(turns: int = 300, runs: int = 30) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        for rows_as_objects in (True, False):
            text = trajectory_text(turns, rows_as_objects)
            kind = "rows as objects" if rows_as_objects else "rows as arrays"
            print(f"{turns}-turn trajectory, {kind}, {len(text) / 1e6:.2f} MB:")
            for name, value in figures(text, runs, Path(scratch)).items():
                print(f"  {name:24} {value:.2f}" + ("" if "ms" in name else "x"))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
