"""Hostile output on Docker: endless, huge, framing-like, binary, and printed between
actions. icplay must keep at most about one output cap per episode, spend time linear in
what the action prints, stop the action, and stay usable; every turn is saved."""

from __future__ import annotations

import time

import pytest
from conftest import RSS_BOUND, peak_rss, rss_now as _rss

from icplay.sandbox.session import MAX_MARKER

pytestmark = pytest.mark.docker

# Each prints without end; the last three look like icplay's own marker (0x1e, a nonce-
# like word, a status) to a parser that keeps everything after a 0x1e.
ENDLESS = {
    "yes": "yes",
    "no-newlines": "tr '\\0' x < /dev/zero",
    "record-separators": "tr '\\0' '\\036' < /dev/zero",
    "fake-markers": "yes $'\\036deadbeefdeadbeef 0 0 ok /testbed'",
    "fake-marker-no-end": "while :; do printf '\\036%.0s0123456789abcdef 0 0 ok /' {1..2000}; done",
    "one-separator-then-endless": "printf '\\036'; yes",
    "one-separator-then-long-lines": "printf '\\036'; tr '\\0' y < /dev/zero",
}


@pytest.mark.parametrize("action", ENDLESS.values(), ids=ENDLESS.keys())
def test_endless_output_is_stopped_with_bounded_memory(play_docker, action):
    played = play_docker()
    cap = played.sandbox.shell.output_cap
    with peak_rss() as rss:
        turn = played.act(action)
    assert turn.info["truncated_bytes"] > 0
    # stopped for its output, not by the clock: a parse that costs more than linear
    # time in the output would not read 8 caps within the timeout
    assert "kept printing far beyond the output limit" in " ".join(turn.info["notes"])
    assert not turn.info["timed_out"]
    assert len(turn.observation.encode()) <= cap + 4096
    assert rss.growth < RSS_BOUND, f"icplay grew by {rss.growth / 2**20:.0f} MiB"
    played.assert_usable()
    played.assert_all_saved()


def test_huge_binary_output_is_capped_and_saved(play_docker):
    played = play_docker()
    cap = played.sandbox.shell.output_cap
    with peak_rss() as rss:
        turn = played.act("head -c 6M /dev/urandom; printf '\\0\\0\\xff\\xfe'; echo; echo done")
    assert turn.exit_code == 0
    assert turn.info["truncated_bytes"] > 5 * 2**20
    assert len(turn.observation) <= cap + 4096
    assert rss.growth < RSS_BOUND
    played.assert_usable()
    played.assert_all_saved()


def test_background_output_between_actions_is_not_buffered(play_docker):
    played = play_docker()
    shell = played.sandbox.shell
    cap = shell.output_cap
    with peak_rss() as rss:
        started = played.act("yes icplay-background-noise &")
        assert started.exit_code == 0
        time.sleep(3)     # nobody reads for the session meanwhile: icplay must drain and count
        held = shell.held_bytes() if hasattr(shell, "held_bytes") else None
        idle_growth = max(0, _rss() - rss.start)
        turn = played.act("echo next")
    assert idle_growth < RSS_BOUND, f"icplay grew by {idle_growth / 2**20:.0f} MiB while idle"
    assert rss.growth < RSS_BOUND, f"icplay grew by {rss.growth / 2**20:.0f} MiB"
    assert held is not None and held <= cap + MAX_MARKER + 64, held
    # the background job's output lands in the next action, capped, and is stopped
    assert turn.info["truncated_bytes"] > 0
    played.assert_usable()
    played.assert_all_saved()


def test_output_ending_in_a_partial_marker_is_shown(play_docker):
    played = play_docker()
    turn = played.act("printf 'a\\036b\\036'; printf '\\036'")
    assert turn.observation == "a\x1eb\x1e\x1e"
    assert turn.exit_code == 0
