"""The seat probed as a hostile user would (the audit of issue 22's browser seat): over real
HTTP and websockets (aiohttp's test server), each app a real process — ``probe_app.py``,
which reports what a seat's process gets: its environment, its open files, the screen size
and every message that reaches its stdin."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from icplay.seat.relay import COLUMNS, MAX_MESSAGE, ROWS
from icplay.seat.server import FOLLOWS, SeatServer
from icplay.seat.study import seats_of
from icplay.study.seats import SUPERVISOR, Seat, Seats

from seat_helpers import make_study

PROBE = Path(__file__).with_name("probe_app.py")
WAIT = 60                                   # seconds before a wait fails (not a speed: a hang)


class ProbeCommands:
    """Every seat's app, and every followed episode, is the probe, logging to ``folder/NAME.jsonl``."""

    def __init__(self, folder: Path, crash: bool = False) -> None:
        self.folder, self.crash = folder, crash

    def for_seat(self, seat: Seat) -> str:
        return self._probe(seat.name)

    def follow(self, trajectory: Path) -> str:
        return self._probe("follow")

    def _probe(self, name: str) -> str:
        return f"{sys.executable} {PROBE} {self.folder / (name + '.jsonl')}" + (" crash" if self.crash else "")


def reports(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def wait_for(condition, what: str):
    for _ in range(WAIT * 10):
        if (found := condition()):
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"never: {what}")


async def probed_server(tmp_path, monkeypatch, crash: bool = False):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")      # the server's secrets
    monkeypatch.setenv("ICPLAY_ANNOTATOR", "bo")
    make_study("pilot")
    seats = seats_of("pilot")
    tokens = {"ada": seats.issue("ada"), "sam": seats.issue("sam", SUPERVISOR)}
    episode = tmp_path / "episode.json"
    server = SeatServer(seats, ProbeCommands(tmp_path, crash), "http://127.0.0.1:8123",   # type: ignore[arg-type]
                        episodes=lambda: {"ep": episode})
    client = TestClient(TestServer(server.application()))
    await client.start_server()
    return client, tokens, server


@pytest.fixture
async def probed(tmp_path, monkeypatch):
    client, tokens, server = await probed_server(tmp_path, monkeypatch)
    yield client, tokens, server
    await wait_for(lambda: not server.live, "every app ended")       # each relay's process stopped and reaped
    await client.close()


def socket_headers(server: SeatServer, token: str) -> dict:
    return {"Origin": server.origin, "Cookie": f"{server.cookie}={token}"}


async def raw_get(client: TestClient, target: str, headers: str = "") -> tuple[int, str]:
    """A request line sent as it is (no client library tidying the path): status, headers."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {client.host}:{client.port}\r\n{headers}"
                 "Connection: close\r\n\r\n".encode("latin-1"))
    head = (await reader.read()).decode("latin-1").split("\r\n\r\n")[0]
    writer.close()
    return int(head.split()[1]), head


@pytest.mark.parametrize("path", ["//evil.example/x", "/%2F%2Fevil.example", "/\\evil.example",
                                  "/%0d%0aSet-Cookie:%20planted=1", "/ws/follow/ep"])
async def test_the_link_sends_home_never_to_the_path_it_came_with(probed, path):
    client, tokens, server = probed
    status, head = await raw_get(client, f"{path}?token={tokens['ada']}&fontsize=18")
    assert status == 303 and "\r\nLocation: /?fontsize=18\r\n" in head and "planted" not in head
    status, head = await raw_get(client, f"{path}?token={tokens['ada']}x")
    assert status == 401 and "Location" not in head


async def test_the_app_inherits_no_secret_and_no_open_file_of_the_server(probed, tmp_path):
    client, tokens, server = probed
    async with client.ws_connect("/ws", headers=socket_headers(server, tokens["ada"])) as socket:
        started = await wait_for(lambda: reports(tmp_path / "ada.jsonl"), "ada's app started")
        env, files = started[0]["env"], started[0]["files"]
        assert "OPENAI_API_KEY" not in env and "ICPLAY_ANNOTATOR" not in env
        assert env["ICPLAY_HOME"] and env["PATH"] and env["TEXTUAL_DRIVER"].endswith("WebDriver")
        assert files == [str(tmp_path / "ada.jsonl")]                  # no socket, no seats file, no other seat's
        await socket.close()
    await wait_for(lambda: {"meta": {"type": "quit"}} in reports(tmp_path / "ada.jsonl"), "ada's app asked to quit")


async def test_sizes_are_a_screens_and_only_the_pages_messages_reach_the_app(probed, tmp_path):
    client, tokens, server = probed
    log = tmp_path / "ada.jsonl"
    async with client.ws_connect("/ws?width=1000000000&height=-5", headers=socket_headers(server, tokens["ada"])) \
            as socket:
        started = await wait_for(lambda: reports(log), "ada's app started")
        assert (started[0]["env"]["COLUMNS"], started[0]["env"]["ROWS"]) == (str(COLUMNS[1]), str(ROWS[0]))
        for message in ('["resize", {"width": 1000000000, "height": 1000000000}]',
                        '["resize", {"width": "wide", "height": true}]', "not json", '{"stdin": "x"}', "[]",
                        '["exec", "sh -c id"]', '["stdin", 5]', '["stdin"]', f'["ping", "{"p" * 1000}"]',
                        '["deliver_chunk_request", {}]', '["quit"]', '["stdin", "SELECT 1;"]'):
            await socket.send_str(message)
        arrived = await wait_for(lambda: [r for r in reports(log) if "data" in r], "the keys")
        assert arrived == [{"data": "SELECT 1;"}]
        metas = [r["meta"] for r in reports(log) if "meta" in r]
        assert metas == [{"type": "resize", "width": COLUMNS[1], "height": ROWS[1]},
                         {"type": "resize", "width": 80, "height": 24}]
        await socket.send_str('["ping", "t1"]')
        pong = await socket.receive(timeout=WAIT)
        assert json.loads(pong.data) == ["pong", "t1"]


async def test_a_message_bigger_than_any_paste_closes_the_socket(probed, tmp_path):
    client, tokens, server = probed
    async with client.ws_connect("/ws", headers=socket_headers(server, tokens["ada"])) as socket:
        await wait_for(lambda: reports(tmp_path / "ada.jsonl"), "ada's app started")
        await socket.send_str(json.dumps(["stdin", "x" * (MAX_MESSAGE + 1)]))
        closing = await socket.receive(timeout=WAIT)
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING)
    assert not [r for r in reports(tmp_path / "ada.jsonl") if "data" in r]


async def test_a_token_revoked_while_its_app_runs_ends_that_app(probed, tmp_path):
    client, tokens, server = probed
    async with client.ws_connect("/ws", headers=socket_headers(server, tokens["ada"])) as socket:
        await wait_for(lambda: reports(tmp_path / "ada.jsonl"), "ada's app started")
        Seats(server.seats.path).issue("ada")                     # `icplay serve tokens --annotator ada` elsewhere
        closing = await socket.receive(timeout=WAIT)
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    await wait_for(lambda: {"meta": {"type": "quit"}} in reports(tmp_path / "ada.jsonl"), "ada's app asked to quit")
    await wait_for(lambda: not server.busy, "ada's seat free again")


async def test_a_supervisor_follows_a_few_episodes_at_once_not_any_number(probed, tmp_path):
    client, tokens, server = probed
    headers = socket_headers(server, tokens["sam"])
    sockets = [await client.ws_connect("/ws/follow/ep", headers=headers) for _ in range(FOLLOWS)]
    await wait_for(lambda: len(reports(tmp_path / "follow.jsonl")) == FOLLOWS, "the followed episodes")
    refused = await client.get("/ws/follow/ep", headers={**headers, "Connection": "Upgrade", "Upgrade": "websocket",
                                                         "Sec-WebSocket-Version": "13",
                                                         "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert refused.status == 429
    await sockets.pop().close()
    await wait_for(lambda: server.following[Seat("sam", SUPERVISOR)] < FOLLOWS, "one follow ended")
    sockets.append(await client.ws_connect("/ws/follow/ep", headers=headers))
    for socket in sockets:
        await socket.close()


async def test_a_crashed_app_closes_the_page_and_sends_it_nothing_of_its_traceback(tmp_path, monkeypatch):
    client, tokens, server = await probed_server(tmp_path, monkeypatch, crash=True)
    try:
        async with client.ws_connect("/ws", headers=socket_headers(server, tokens["ada"])) as socket:
            received = []
            while (message := await socket.receive(timeout=WAIT)).type not in (aiohttp.WSMsgType.CLOSE,
                                                                              aiohttp.WSMsgType.CLOSED):
                received.append(message.data)
        assert not [m for m in received if b"sk-secret" in (m if isinstance(m, bytes) else m.encode())]
        await wait_for(lambda: not server.busy and not server.live, "the seat free again (a reload starts anew)")
    finally:
        await client.close()


def test_a_supervisor_can_follow_nothing_outside_the_home(tmp_path):
    """A trajectory linked into the study from outside icplay's home (a file, a folder) is
    not offered, and a name not offered is followed by nobody (the follow socket's 404)."""
    from icplay.episode import Trajectory
    from icplay.seat.study import episodes_of
    from icplay.store import save_trajectory
    from icplay.study.model import load_study, sessions_dir

    make_study("pilot")
    outside = tmp_path / "outside"
    outside.mkdir()
    save_trajectory(Trajectory(task={"set": "sql", "id": "secret-01", "query": "q"}, env="sql", sandbox="sqlite",
                               status="running", annotator="zed"), outside / "secret-01.json")
    mine = sessions_dir(load_study("pilot")) / "ada" / "sql"
    mine.mkdir(parents=True)
    save_trajectory(Trajectory(task={"set": "sql", "id": "bookshop-01", "query": "q"}, env="sql", sandbox="sqlite",
                               status="running", annotator="ada"), mine / "bookshop-01.json")
    (mine / "linked-01.json").symlink_to(outside / "secret-01.json")
    (mine.parent / "linked").symlink_to(outside, target_is_directory=True)
    assert list(episodes_of("pilot")) == ["studies/pilot/sessions/ada/sql/bookshop-01.json"]
