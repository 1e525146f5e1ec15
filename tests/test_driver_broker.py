"""The broker on its own: requests as futures answered from another thread, withdrawn by a stop,
settled by a mode switch (also one that races the request), pause and single step."""

from __future__ import annotations

import threading

import pytest

from icplay.driver import (ACTION, AUTO, CONFIRM, HUMAN_MODE, PAUSED, PROPOSAL, Broker, Decision)
from icplay.episode import HAND_BACK, RUN, STOP, TAKE_OVER, Proposal


def in_thread(fn):
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", fn()), daemon=True)
    thread.start()
    return thread, out


def opened(broker: Broker, kind: str):
    """Wait until a request of ``kind`` is open; return it."""
    seen = threading.Event()
    box = {}

    def listener(what, payload):
        if what == "request" and payload.kind == kind:
            box["req"] = payload
            seen.set()

    broker.listeners.append(listener)
    return seen, box


def test_a_request_is_answered_from_another_thread_once():
    broker = Broker(CONFIRM)
    seen, box = opened(broker, PROPOSAL)
    thread, out = in_thread(lambda: broker.decide(Proposal("ls")))
    assert seen.wait(5)
    req = box["req"]
    assert broker.pending() == [req] and req.proposal.action == "ls"
    with pytest.raises(ValueError, match="takes"):
        broker.answer(req.id, Decision.hand_back())          # not a proposal's answer
    assert broker.answer(req.id, Decision.edit("ls -la"))
    assert not broker.answer(req.id, Decision.run())         # answered already
    thread.join(5)
    assert out["value"] == Decision.edit("ls -la") and broker.pending() == []


@pytest.mark.parametrize("mode, expected", [(AUTO, RUN), (HUMAN_MODE, TAKE_OVER)])
def test_switching_mode_settles_a_waiting_proposal(mode, expected):
    broker = Broker(CONFIRM)
    seen, box = opened(broker, PROPOSAL)
    thread, out = in_thread(lambda: broker.decide(Proposal("ls")))
    assert seen.wait(5)
    broker.set_mode(mode)
    thread.join(5)
    assert out["value"].kind == expected and not broker.answer(box["req"].id, Decision.run())


def test_a_mode_switch_that_races_the_request_is_not_lost():
    broker = Broker(CONFIRM)
    broker.listeners.append(lambda what, payload: None)
    broker._mode = AUTO            # as if set_mode ran between the driver's look at the mode and its request
    assert broker.wait(PROPOSAL, Proposal("ls")).kind == RUN
    broker._mode = CONFIRM
    assert broker.wait(ACTION).kind == HAND_BACK


def test_a_waiting_human_action_is_handed_back_and_a_stop_withdraws_everything():
    broker = Broker(HUMAN_MODE)
    assert broker.agent_mode == CONFIRM
    seen, _ = opened(broker, ACTION)
    thread, out = in_thread(broker.ask_action)
    assert seen.wait(5)
    broker.hand_back()
    thread.join(5)
    assert out["value"].kind == HAND_BACK and broker.mode == CONFIRM

    seen, box = opened(broker, PROPOSAL)
    thread, out = in_thread(lambda: broker.decide(Proposal("ls")))
    assert seen.wait(5)
    broker.withdraw_all()
    thread.join(5)
    assert out["value"].kind == STOP and not broker.answer(box["req"].id, Decision.run())
    assert broker.decide(Proposal("ls")).kind == STOP        # until reopened
    broker.reopen()
    broker.set_mode(AUTO)
    assert broker.decide(Proposal("ls")).kind == RUN


def test_pause_after_this_step_and_step_exactly_one():
    broker = Broker(AUTO)
    assert broker.checkpoint() is None and not broker.paused
    broker.pause_after_step()
    seen, box = opened(broker, PAUSED)
    thread, out = in_thread(broker.checkpoint)
    assert seen.wait(5) and broker.paused
    broker.step_one()
    thread.join(5)
    assert out["value"] is None                               # one step goes through ...
    seen, box = opened(broker, PAUSED)
    thread, out = in_thread(broker.checkpoint)               # ... and the next waits again
    assert seen.wait(5)
    broker.resume()
    thread.join(5)
    assert out["value"] is None and broker.checkpoint() is None and not broker.paused

    broker.pause_after_step()
    seen, box = opened(broker, PAUSED)
    thread, out = in_thread(broker.checkpoint)
    assert seen.wait(5)
    broker.answer(box["req"].id, Decision.take_over())
    thread.join(5)
    assert out["value"].kind == TAKE_OVER


def test_unknown_modes_and_decisions_are_refused():
    with pytest.raises(ValueError, match="unknown mode"):
        Broker("yolo")
    with pytest.raises(ValueError, match="unknown mode"):
        Broker().set_mode("yolo")
    with pytest.raises(ValueError, match="unknown decision"):
        Decision("approve")
