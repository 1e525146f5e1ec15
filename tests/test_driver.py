"""The driver and its broker on a real SQLite env, with the real openai client against the
scripted local server (streaming and not): every intervention, mode switches while the model
thinks, stopping mid-call and mid-command, resuming a stopped watched episode, failures."""

from __future__ import annotations

import queue
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "agents"))

from fake_openai_server import FakeOpenAIServer, Reply, Script, fenced, rate_limited  # noqa: E402

from icplay.agents.llm import ChatModel, LLMPolicy  # noqa: E402
from icplay.agents.replay import GoldPolicy  # noqa: E402
from icplay.driver import (ACTION, AUTO, CONFIRM, FAILED, HUMAN_MODE, INVALID, PAUSED, PROPOSAL,  # noqa: E402
                           SUBMIT_PROPOSAL, Broker, Decision, Driver, DriverSettings, Limits)
from icplay.driver.events import (CallCancelled, Delta, Failure, RequestOpened, Retrying, State,  # noqa: E402
                                  StateChanged)
from icplay.languages import make_env  # noqa: E402
from icplay.episode import Episode  # noqa: E402
from icplay.session import Session  # noqa: E402
from icplay.tasks.registry import load_tasks  # noqa: E402

TASK = next(t for t in load_tasks("sql") if t.id == "bookshop-01")
GOLD = TASK.gold
WRONG = "SELECT count(*) FROM books"
FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture
def env():
    env = make_env("sql", sandbox="sqlite")
    yield env
    env.close()


@pytest.fixture
def server():
    servers = []

    def start(replies, **kw):
        s = FakeOpenAIServer(Script(replies) if isinstance(replies, list) else replies, **kw).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def llm(server, stream=True, **kw):
    kw.setdefault("backoff", 0.001)
    return LLMPolicy(ChatModel("scripted", base_url=server.url, api_key="k", stream=stream, **kw), "tryagain", "agent")


class Watch:
    """The driver on its own thread, as a UI runs it; requests and events arrive in queues."""

    def __init__(self, driver: Driver):
        self.driver = driver
        self.events = []
        self.requests: "queue.Queue" = queue.Queue()
        self.states: "queue.Queue" = queue.Queue()
        driver.listeners.append(self._on_event)
        self.result = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_event(self, event):
        self.events.append(event)
        if isinstance(event, RequestOpened):
            self.requests.put(event.request)
        elif isinstance(event, StateChanged):
            self.states.put(event.state)

    def _run(self):
        self.result = self.driver.run()

    def start(self) -> "Watch":
        self.thread.start()
        return self

    def request(self, kind=None):
        req = self.requests.get(timeout=20)
        if kind is not None:
            assert req.kind == kind, (req.kind, req.proposal)
        return req

    def answer(self, decision, kind=None):
        req = self.request(kind)
        assert self.driver.broker.answer(req.id, decision)
        return req

    def wait_state(self, state):
        while True:
            if self.states.get(timeout=20) == state:
                return

    def join(self):
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        return self.result

    def kinds(self, kind):
        """The events of one type (``icplay.driver.events``)."""
        return [e for e in self.events if isinstance(e, kind)]


def driver_for(env, policy, mode=CONFIRM, protocol="agent", tmp_path=None, episode=None, **kw):
    saved = []
    episode = episode or Episode(env, TASK, save=lambda t: saved.append(t.status),
                                 policy={"kind": "llm", "model": "scripted"})
    return Driver(episode, DriverSettings(policy, protocol, Limits(max_turns=10), broker=Broker(mode), on_failure="ask",
                                          **kw))


@pytest.mark.parametrize("stream", [True, False])
def test_approve_edit_reject_and_submit_in_confirm_mode(env, server, stream):
    srv = server([fenced(WRONG), fenced(WRONG), fenced("SELECT title FROM books"), "Done.\n```sql\nsubmit\n```"],
                 streaming=stream)
    watch = Watch(driver_for(env, llm(srv))).start()
    req = watch.answer(Decision.run(), PROPOSAL)                          # approve
    assert req.proposal.action == WRONG
    watch.answer(Decision.edit(GOLD, "poetry only"), PROPOSAL)           # edit in place
    watch.answer(Decision.reject("order by title, poetry only"), PROPOSAL)  # reject with a comment
    req = watch.answer(Decision.run(), SUBMIT_PROPOSAL)                   # the agent's submit is confirmed too
    traj = watch.join()
    assert traj.status == "submitted" and traj.reward == 1.0   # the edit ran last; the rejected query never ran
    kinds = [t.kind for t in traj.turns]
    assert kinds == ["agent", "edited", "rejected"]
    assert traj.turns[1].action == GOLD and traj.turns[1].proposed == WRONG and traj.turns[1].comment == "poetry only"
    assert "Poetry" not in traj.turns[0].observation and traj.turns[0].author == "agent"
    # the reject comment reached the model in the very next request
    last = srv.requests[3]["messages"][-1]["content"]
    assert "rejected" in last and "order by title, poetry only" in last
    # the edit is shown to the model as such
    assert any("replaced your" in m["content"] and GOLD in m["content"] for m in srv.requests[2]["messages"])
    deltas = "".join(e.text for e in watch.kinds(Delta))
    assert (deltas.endswith("submit\n```")) == stream and (srv.streamed == 4) == stream
    assert traj.tokens > 0 and traj.usage["calls"] == 4


def test_a_human_edit_to_submit_submits_instead_of_running(env, server):
    srv = server([fenced(WRONG), fenced(GOLD)])
    watch = Watch(driver_for(env, llm(srv), protocol="intercode")).start()
    watch.answer(Decision.run(), PROPOSAL)
    watch.answer(Decision.edit("submit"), PROPOSAL)
    traj = watch.join()
    assert traj.status == "submitted" and traj.reward == 0.0 and [t.action for t in traj.turns] == [WRONG]
    assert traj.policy["ended_by"] == "submit" and traj.turns[0].reward == 0.0


def test_take_over_costs_no_model_call_and_hand_back_shows_the_human_turns(env, server):
    srv = server([fenced(WRONG), fenced(GOLD), "```sql\nsubmit\n```"])
    watch = Watch(driver_for(env, llm(srv))).start()
    watch.answer(Decision.take_over(), PROPOSAL)          # the proposal is dropped, the human acts
    watch.answer(Decision.run("SELECT genre FROM books"), ACTION)
    watch.answer(Decision.run("SELECT count(*) FROM books WHERE genre = 'Poetry'"), ACTION)
    assert len(srv.requests) == 1                          # no model call while the human typed
    watch.answer(Decision.hand_back(), ACTION)
    req = watch.answer(Decision.run(), PROPOSAL)
    assert req.proposal.action == GOLD
    watch.answer(Decision.run(), SUBMIT_PROPOSAL)
    traj = watch.join()
    assert [t.author for t in traj.turns] == ["human", "human", "agent"] and traj.reward == 1.0
    prompt = "\n".join(m["content"] for m in srv.requests[1]["messages"])
    assert prompt.count("The human at the keyboard ran:") == 2 and "WHERE genre = 'Poetry'" in prompt


def test_switching_to_human_while_the_model_thinks_cancels_the_call(env, server):
    hold = threading.Event()
    srv = server([Reply(fenced(WRONG), hold=hold), fenced(GOLD), "```sql\nsubmit\n```"])
    driver = driver_for(env, llm(srv), mode=AUTO)
    watch = Watch(driver).start()
    assert srv.wait_requests(1)
    watch.wait_state("thinking")
    driver.broker.set_mode(HUMAN_MODE)                    # mid-call
    watch.answer(Decision.run(GOLD), ACTION)
    hold.set()
    assert watch.kinds(CallCancelled) and len(srv.requests) == 1
    watch.answer(Decision.submit(), ACTION)
    traj = watch.join()
    assert [t.author for t in traj.turns] == ["human"] and traj.reward == 1.0


def test_switching_to_auto_while_a_proposal_waits_or_the_model_thinks(env, server):
    hold = threading.Event()
    srv = server([fenced(WRONG), Reply(fenced(GOLD), hold=hold), "```sql\nsubmit\n```"])
    driver = driver_for(env, llm(srv), mode=CONFIRM)
    watch = Watch(driver).start()
    watch.request(PROPOSAL)
    driver.broker.set_mode(AUTO)                           # answers the waiting proposal: it runs
    assert srv.wait_requests(2)
    driver.broker.set_mode(CONFIRM)                        # while the model thinks: its proposal will wait
    hold.set()
    req = watch.request(PROPOSAL)
    assert req.proposal.action == GOLD
    driver.broker.set_mode(AUTO)
    traj = watch.join()
    assert [t.action for t in traj.turns] == [WRONG, GOLD] and traj.status == "submitted" and traj.reward == 1.0


@pytest.mark.parametrize("stream", [True, False])
def test_stop_mid_call_records_no_turn_and_leaves_the_episode_stopped(env, server, stream):
    hold = threading.Event()
    srv = server([Reply(fenced(WRONG), hold=hold, hold_after=2)], streaming=stream)
    driver = driver_for(env, llm(srv), mode=AUTO)
    watch = Watch(driver).start()
    assert srv.wait_requests(1)
    if stream:
        while not watch.kinds(Delta):     # the reply has begun to stream
            threading.Event().wait(0.01)
    driver.stop()
    traj = watch.join()
    hold.set()
    assert traj.status == "stopped" and traj.turns == [] and watch.kinds(CallCancelled)


def test_stop_mid_command_interrupts_it_and_keeps_the_turn(env, server):
    srv = server([fenced(FOREVER)])
    driver = driver_for(env, llm(srv), mode=AUTO)
    watch = Watch(driver).start()
    watch.wait_state(State.RUNNING)
    driver.stop()
    traj = watch.join()
    assert traj.status == "stopped" and len(traj.turns) == 1
    assert traj.turns[0].action == FOREVER and traj.turns[0].info.get("interrupted")


def test_a_stopped_watched_episode_resumes_in_another_mode(env, server, tmp_path):
    session = Session("watch", home=tmp_path)
    srv = server([fenced(WRONG), Reply(fenced(GOLD), hold=threading.Event())])
    episode, replayed = session.open_episode(env, TASK, policy={"kind": "llm"})
    driver = driver_for(env, llm(srv), mode=CONFIRM, episode=episode)
    watch = Watch(driver).start()
    watch.answer(Decision.edit("SELECT title FROM books WHERE genre = 'Poetry'"), PROPOSAL)
    assert srv.wait_requests(2)
    driver.stop()
    first = watch.join()
    assert first.status == "stopped" and len(first.turns) == 1
    assert session.load(TASK).status == "stopped"

    env2 = make_env("sql", sandbox="sqlite")
    try:
        srv2 = server([fenced("SELECT title FROM books WHERE genre = 'Poetry' ORDER BY title"), "```sql\nsubmit\n```"])
        episode, replayed = session.open_episode(env2, TASK, policy={"kind": "llm"})
        assert replayed == 1
        driver = driver_for(env2, llm(srv2), mode=AUTO, episode=episode)
        traj = Watch(driver).start().join()
        assert traj.status == "submitted" and traj.reward == 1.0 and [t.kind for t in traj.turns] == ["edited", "agent"]
        assert "replaced your" in "\n".join(m["content"] for m in srv2.requests[0]["messages"])
        assert session.load(TASK).id == first.id
    finally:
        env2.close()


def test_pause_after_step_and_step_exactly_one_in_auto(env):
    broker = Broker(AUTO)
    broker.pause_after_step()
    driver = Driver(Episode(env, TASK), DriverSettings(GoldPolicy(), "agent", broker=broker, on_failure="ask"))
    watch = Watch(driver).start()
    watch.request(PAUSED)
    assert driver.trajectory.turns == []
    broker.step_one()                                      # the gold query runs, then it pauses again
    watch.request(PAUSED)
    assert len(driver.trajectory.turns) == 1
    broker.resume()
    traj = watch.join()
    assert traj.status == "submitted" and traj.reward == 1.0


def test_failures_are_events_and_requests_never_a_crash(env, server):
    srv = server([fenced(GOLD)], api_key="right")
    policy = LLMPolicy(ChatModel("scripted", base_url=srv.url, api_key="wrong", backoff=0.001), "tryagain", "agent")
    watch = Watch(driver_for(env, policy)).start()
    req = watch.request(FAILED)
    assert "rejected the API key" in req.message and watch.kinds(Failure)
    watch.driver.broker.answer(req.id, Decision.take_over())
    watch.answer(Decision.run(GOLD), ACTION)
    watch.answer(Decision.submit(), ACTION)
    traj = watch.join()
    assert traj.reward == 1.0 and traj.turns[0].author == "human"

    policy = LLMPolicy(ChatModel("scripted", base_url="http://127.0.0.1:9/v1", retries=0), "tryagain", "agent")
    watch = Watch(driver_for(env, policy)).start()
    req = watch.request(FAILED)
    assert "nothing is listening at http://127.0.0.1:9/v1 (connection refused)" in req.message
    watch.driver.broker.answer(req.id, Decision.stop())
    assert watch.join().status == "stopped"

    srv = server([rate_limited(0.2), "I would rather chat.", fenced(GOLD), "```sql\nsubmit\n```"])
    watch = Watch(driver_for(env, llm(srv))).start()
    req = watch.request(INVALID)                              # the raw reply, for the human to fix
    assert req.message == "I would rather chat."
    retry = watch.kinds(Retrying)
    assert retry and retry[0].delay >= 0.2 and "429" in retry[0].message
    watch.driver.broker.answer(req.id, Decision.run())        # ask again: the retry message is recorded
    watch.answer(Decision.run(), PROPOSAL)
    watch.answer(Decision.run(), SUBMIT_PROPOSAL)
    traj = watch.join()
    assert [t.kind for t in traj.turns] == ["invalid", "agent"] and traj.reward == 1.0


def test_a_stop_withdraws_a_waiting_request_and_late_answers_are_refused(env, server):
    srv = server([fenced(WRONG)])
    watch = Watch(driver_for(env, llm(srv))).start()
    req = watch.request(PROPOSAL)
    watch.driver.stop()
    traj = watch.join()
    assert traj.status == "stopped" and traj.turns == []
    assert not watch.driver.broker.answer(req.id, Decision.run())
    with pytest.raises(ValueError):
        Decision("approve")
