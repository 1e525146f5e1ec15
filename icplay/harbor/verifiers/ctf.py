"""CTF: the flag in /app/flag.txt against the task's flag (InterCode's comparison, case-insensitive)."""

from __future__ import annotations

import sys
from typing import Any

from icplay.ctf.reward import flag_reward

from icplay.harbor.verifiers.common import read_answer, run


def score(expected: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    written = read_answer("flag.txt")
    if written is None:
        return 0.0, {"error": "no flag: /app/flag.txt was not written"}
    lines = [line.strip() for line in written.splitlines() if line.strip()]
    return flag_reward(lines[0] if lines else "", expected["flag"])


def main() -> int:
    return run(score)


if __name__ == "__main__":
    sys.exit(main())
