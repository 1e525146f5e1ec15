"""Agreement of ``icplay rescore`` with Bash episodes recorded by InterCode's own env
(``bench/record_intercode_bash.py``), per file system and mode, and every disagreeing turn
with a cause guessed from what differs::

    python bench/bash_rescore_agreement.py /work/recordings

reads ``intercode-bash-fsN.json`` (the recordings) and ``rescore-MODE-fsN.jsonl`` (the
``--out`` of ``icplay rescore``, MODE default or compat) from that folder.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

QUOTING = ('"', "\\", "$", "`")


def cause(row: dict, recorded_obs: str) -> str:
    if row["observation"] == recorded_obs or row["observation_agrees"]:
        return "same output; the gold's side differs"
    action = row["action"]
    extra = set(row["observation"].splitlines()) - set(recorded_obs.splitlines())
    if extra and extra <= {"mnt", "tmp"} and set(recorded_obs.splitlines()) <= set(row["observation"].splitlines()):
        return "InterCode's reset (git clean -fd at /) removed the empty /mnt and /tmp"
    if action.lstrip().startswith("cd"):
        return "cd (InterCode emulates it)"
    if any(c in action for c in QUOTING):
        return "quotes, $ or \\ (InterCode's bash -c through docker-py's shlex)"
    return "output differs"


def main(folder: Path) -> None:
    for mode in ("default", "compat"):
        turns = agree = episodes = solved_agree = 0
        causes: Counter[str] = Counter()
        listed = []
        for n in (1, 2, 3, 4):
            out = folder / f"rescore-{mode}-fs{n}.jsonl"
            if not out.exists():
                print(f"{mode} fs{n}: no {out.name}")
                continue
            recorded = json.loads((folder / f"intercode-bash-fs{n}.json").read_text())
            rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            by_episode: dict[str, list[dict]] = {}
            for row in rows:
                by_episode.setdefault(row["episode"], []).append(row)
            t = sum(1 for r in rows)
            a = sum(1 for r in rows if r["agrees"])
            e = len(by_episode)
            s = sum(1 for k, rs in by_episode.items()
                    if (max(r["recorded_reward"] for r in rs) == 1.0) == (max(r["reward"] for r in rs) == 1.0))
            print(f"{mode} fs{n}: turns {a}/{t}, solved status {s}/{e}")
            turns, agree, episodes, solved_agree = turns + t, agree + a, episodes + e, solved_agree + s
            for row in rows:
                if not row["agrees"]:
                    obs = recorded[row["episode"]]["turn_history"]["observations"][row["turn"]]
                    c = cause(row, obs)
                    causes[c] += 1
                    listed.append(f"  fs{n}/{row['episode']} turn {row['turn']}: recorded {row['recorded_reward']:.2f}, "
                                  f"icplay {row['reward']:.2f} — {c}: {row['action'][:80]!r}")
        if turns:
            print(f"{mode} total: turns {agree}/{turns} ({100 * agree / turns:.1f}%), "
                  f"solved status {solved_agree}/{episodes} ({100 * solved_agree / episodes:.1f}%)")
            for c, k in causes.most_common():
                print(f"  {k:4d}  {c}")
            print("\n".join(listed))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/recordings"))
