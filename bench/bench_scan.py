"""What the scanners cost next to reading the episodes they scan.

Writes N synthetic trajectories (bench_view's: SQL and Bash, human and agent, realistic
observations) into a scratch folder, then measures in this one process: parsing every file
(``load_trajectory``, what a viewer's cold scan or ``icplay scan`` pays anyway) and running
every registered scanner over the parsed episodes (``flags_of``). Prints both and their
ratio: the share a scan adds to a cold read. Run from a checkout:
    PYTHONPATH=. python bench/bench_scan.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_view import make_trajectories  # noqa: E402


def main(n: int = 2000) -> None:
    from icplay.scan.registry import flags_of
    from icplay.store import load_trajectory

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        make_trajectories(home, n)
        files = sorted(home.rglob("*.json"))
        started = time.perf_counter()
        trajs = [load_trajectory(f) for f in files]
        parse = time.perf_counter() - started
        flags_of(trajs[0])                           # the scanners imported once, outside the timing
        started = time.perf_counter()
        flagged = sum(bool(flags_of(t)) for t in trajs)
        scan = time.perf_counter() - started
    print(f"{len(trajs)} episodes: parse {parse:.2f} s, scanners {scan:.2f} s ({flagged} flagged)")
    print(f"scanners / parse = {scan / parse:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
