"""The sandbox pool: each screen leases its own env; envs given back are lent again."""

from __future__ import annotations

import threading

from icplay.tui.app import default_env_factory
from icplay.frontend.leases import SandboxPool

from test_play_sql import run_sql
from tui_helpers import play_screen, wait_for, wait_ready


def sql_pool() -> SandboxPool:
    return SandboxPool(default_env_factory, lambda kind: None)


def test_two_leases_never_share_an_env_and_a_given_back_env_is_lent_again(sql_ready):
    pool = sql_pool()
    first, second = pool.lease("sql"), pool.lease("sql")
    assert first.env is not second.env
    first.give_back()
    third = pool.lease("sql")
    assert third.env is first.env and len(pool.envs) == 2
    second.discard()                                  # a broken env is closed, not kept
    assert second.env not in pool.envs
    third.give_back()
    pool.close()
    assert pool.envs == []


def test_a_lease_waits_for_the_env_of_a_screen_that_is_leaving(sql_ready):
    pool = sql_pool()
    leaving = pool.lease("sql")
    pool.leaving(leaving)                             # its screen left; a step still runs
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.lease("sql")))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not got              # waits instead of starting a second sandbox
    leaving.give_back()
    waiter.join(10)
    assert got and got[0].env is leaving.env
    got[0].give_back()
    pool.close()


async def test_the_next_task_reuses_the_sandbox_the_last_screen_gave_back(make_app, shop_catalog):
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test() as pilot:
        await wait_ready(pilot)
        first = play_screen(app).host.env
        await run_sql(pilot, "SELECT 1")
        await pilot.press("ctrl+b")                   # back to the picker: the lease is given back
        await wait_for(pilot, lambda: app.pool.envs == [first], 10, "the env to come back")
        app.open_task(app.catalog.find("s2"))
        await wait_ready(pilot)
        assert play_screen(app).host.env is first and len(app.pool.envs) == 1
