"""Agreement of ``icplay rescore`` with recorded Bash episodes, per file system and mode, and
every disagreeing turn with a cause guessed from what differs::

    python bench/bash_rescore_agreement.py /work/recordings
    python bench/bash_rescore_agreement.py FOLDER --recorded 'gpt4-fs{n}.json' \\
        --rescored 'compat=compat-fs{n}.jsonl' --intercode 'intercode-own-fs{n}.jsonl'

By default it reads ``intercode-bash-fsN.json`` (the recordings of
``bench/record_intercode_bash.py``) and ``rescore-MODE-fsN.jsonl`` (the ``--out`` of
``icplay rescore``, MODE default or compat) from that folder. ``--recorded`` and
``--rescored`` (``MODE=PATTERN``, repeatable) name other files (``{n}``: the file system).
``--intercode`` names the per-turn output of ``bench/replay_intercode_bash.py`` (InterCode's
own env on the same recordings): each disagreeing turn then says whether InterCode's env
agrees on it (icplay's difference) or not (drift of the environment both see), and the
totals of InterCode's own env are printed beside icplay's.
"""

from __future__ import annotations

import argparse
import json
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


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def agreement(rows: list[dict], recorded: dict) -> tuple[int, int, int, int]:
    """(turns agreeing, turns, episodes whose solved status agrees, episodes)."""
    by_episode: dict[str, list[dict]] = {}
    for row in rows:
        by_episode.setdefault(row["episode"], []).append(row)
    solved = sum(1 for key, rs in by_episode.items()
                 if (max(recorded[key]["turn_history"]["rewards"]) >= 1.0) == (max(r["reward"] for r in rs) >= 1.0))
    return sum(1 for r in rows if r["agrees"]), len(rows), solved, len(by_episode)


def report(folder: Path, recorded_pattern: str, modes: dict[str, str], intercode_pattern: str | None) -> None:
    for mode, pattern in modes.items():
        totals = Counter()
        own_totals = Counter()
        causes: Counter[str] = Counter()
        listed = []
        for n in (1, 2, 3, 4):
            out = folder / pattern.format(n=n, mode=mode)
            if not out.exists():
                print(f"{mode} fs{n}: no {out.name}")
                continue
            recorded = json.loads((folder / recorded_pattern.format(n=n)).read_text())
            rows = read_rows(out)
            a, t, s, e = agreement(rows, recorded)
            line = f"{mode} fs{n}: turns {a}/{t}, solved status {s}/{e}"
            totals.update(turns=t, agree=a, episodes=e, solved=s)
            own: dict[tuple[str, int], dict] = {}
            if intercode_pattern and (folder / intercode_pattern.format(n=n)).exists():
                own_rows = read_rows(folder / intercode_pattern.format(n=n))
                own = {(r["episode"], r["turn"]): r for r in own_rows}
                oa, ot, os_, oe = agreement(own_rows, recorded)
                own_totals.update(turns=ot, agree=oa, episodes=oe, solved=os_)
                line += f"   (InterCode's own env: turns {oa}/{ot}, solved status {os_}/{oe})"
            print(line)
            for row in rows:
                if row["agrees"]:
                    continue
                obs = recorded[row["episode"]]["turn_history"]["observations"][row["turn"]]
                c = cause(row, obs)
                theirs = own.get((row["episode"], row["turn"]))
                if theirs is not None:
                    c = ("drift (InterCode's env differs too): " if not theirs["agrees"]
                         else "icplay's (InterCode's env agrees): ") + c
                causes[c] += 1
                mark = "" if theirs is None else f", InterCode {theirs['reward']:.2f}"
                listed.append(f"  fs{n}/{row['episode']} turn {row['turn']}: recorded {row['recorded_reward']:.2f}, "
                              f"icplay {row['reward']:.2f}{mark} — {c}: {row['action'][:80]!r}")
        if totals["turns"]:
            print(f"{mode} total: turns {totals['agree']}/{totals['turns']} "
                  f"({100 * totals['agree'] / totals['turns']:.1f}%), solved status "
                  f"{totals['solved']}/{totals['episodes']} ({100 * totals['solved'] / totals['episodes']:.1f}%)")
            if own_totals["turns"]:
                print(f"InterCode's own env: turns {own_totals['agree']}/{own_totals['turns']} "
                      f"({100 * own_totals['agree'] / own_totals['turns']:.1f}%), solved status "
                      f"{own_totals['solved']}/{own_totals['episodes']}")
            for c, k in causes.most_common():
                print(f"  {k:4d}  {c}")
            print("\n".join(listed))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="/work/recordings", type=Path)
    parser.add_argument("--recorded", default="intercode-bash-fs{n}.json")
    parser.add_argument("--rescored", action="append", default=None, metavar="MODE=PATTERN")
    parser.add_argument("--intercode", default=None, metavar="PATTERN")
    args = parser.parse_args(argv)
    modes = dict(item.split("=", 1) for item in args.rescored) if args.rescored else {
        "default": "rescore-default-fs{n}.jsonl", "compat": "rescore-compat-fs{n}.jsonl"}
    report(args.folder, args.recorded, modes, args.intercode)


if __name__ == "__main__":
    main()
