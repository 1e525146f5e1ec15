"""Admission: a family of envs executes at most ``bound`` env calls at once (reset, step,
submit); interrupt and close are never held back; the bound comes from the cores and the
sandbox kind, or from $ICPLAY_MAX_ACTIVE."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from icplay.envs.admission import PER_CORE, Admission, AdmittedEnv, default_bound
from icplay.envs.base import StepResult


class GatedEnv:
    """A fake env whose step waits for the test, counting calls inside at once."""

    name, sandbox_kind, capabilities = "fake", "fake", frozenset()

    def __init__(self, shared: dict, release: threading.Event):
        self.shared, self.release = shared, release
        self.interrupted = False

    def step(self, action, on_output=None):
        with self.shared["lock"]:
            self.shared["inside"] += 1
            self.shared["peak"] = max(self.shared["peak"], self.shared["inside"])
            self.shared["entered"].release()
        self.release.wait()
        with self.shared["lock"]:
            self.shared["inside"] -= 1
        return StepResult(action, 0, 0.0, {})

    def interrupt(self):
        self.interrupted = True


def test_no_more_than_the_bound_execute_and_interrupt_is_not_held():
    shared = {"lock": threading.Lock(), "inside": 0, "peak": 0, "entered": threading.Semaphore(0)}
    release = threading.Event()
    admission = Admission(2)
    envs = [AdmittedEnv(GatedEnv(shared, release), admission) for _ in range(5)]
    threads = [threading.Thread(target=env.step, args=("x",)) for env in envs]
    for thread in threads:
        thread.start()
    shared["entered"].acquire()
    shared["entered"].acquire()          # two are inside; the other three wait for admission
    assert shared["inside"] == 2
    envs[4].interrupt()                  # not an admitted call: goes straight through
    assert envs[4].env.interrupted and envs[4].sandbox_kind == "fake"
    release.set()
    for thread in threads:
        thread.join(60)
    assert shared["peak"] == 2 and shared["inside"] == 0


def test_the_bound_comes_from_cores_and_sandbox_or_the_variable(monkeypatch):
    monkeypatch.delenv("ICPLAY_MAX_ACTIVE", raising=False)
    cores = os.cpu_count() or 1
    assert default_bound("docker") == PER_CORE["docker"] * cores
    assert default_bound("sqlite") == PER_CORE["sqlite"] * cores
    monkeypatch.setenv("ICPLAY_MAX_ACTIVE", "3")
    assert default_bound("docker") == 3
    monkeypatch.setenv("ICPLAY_MAX_ACTIVE", "many")
    with pytest.raises(ValueError, match="ICPLAY_MAX_ACTIVE='many' is not a whole number of at least 1"):
        default_bound("docker")


async def test_async_envs_admit_before_taking_a_thread():
    """max_active=1 on two worker threads: six SQL episodes in flight all finish (a call
    waiting for admission holds no thread, so the others' closes still get one)."""
    from test_async import gold_episode

    from icplay.aio import AsyncEnvs

    async with AsyncEnvs("sql", sandbox="sqlite", max_active=1, max_workers=2) as envs:
        assert envs.factory.admission.bound == 1
        rewards = await asyncio.gather(*(gold_episode(envs, t) for t in envs.tasks[:6]))
        assert rewards == [1.0] * 6


async def test_episode_admission_waits_only_while_admitted_episodes_work():
    from icplay.aio import EpisodeAdmission

    admission = EpisodeAdmission(2)
    await admission.admit()
    await admission.admit()                  # two admitted, both about to work
    third = asyncio.ensure_future(admission.admit())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not third.done()                  # full, and working: it waits
    await admission.idle()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not third.done()                  # one still works
    await admission.leave()                  # one leaves: a place
    await asyncio.wait_for(third, 60)
    assert (admission.active, admission.busy) == (2, 2)
    await admission.idle()
    await admission.idle()                   # everyone idle (waiting for a policy)
    await asyncio.wait_for(admission.admit(), 60)   # admitted over the bound: nothing runs
    assert admission.active == 3


async def test_a_batch_reset_before_any_step_does_not_deadlock():
    """A trainer resets more episodes than the bound before stepping any of them."""
    from icplay.aio import AsyncEnvs

    async with AsyncEnvs("sql", sandbox="sqlite", max_active=2) as envs:
        batch = [envs.make() for _ in range(5)]
        for env, task in zip(batch, envs.tasks):
            await asyncio.wait_for(env.reset(task), 120)
        assert envs.admission.active == 5
        for env, task in zip(batch, envs.tasks):
            await env.step(task.gold)
            assert (await env.step("submit")).reward == 1.0
        assert envs.admission.active == 0
