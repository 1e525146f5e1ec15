"""Hostile clients of ``icplay serve-env``: a real uvicorn server on a port the OS picks, driven
by real clients (openenv-core's GenericEnvClient, websockets, requests, raw sockets).

A client names a task, never a file; a big body is refused without being read; another
site's web page and a foreign Host header are refused; a token is asked for when set (and
needed beyond loopback); HTTP and WebSocket sessions share --max-envs; a silent WebSocket
expires; no client closes another's session; every mistake is a 4xx with one sentence."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install 'icplay[openenv]')")

import requests  # noqa: E402
import uvicorn  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402
from websockets.asyncio.client import connect as ws_connect  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

from icplay.serve.openenv import make_app  # noqa: E402
from icplay.serve.http import uvicorn_options  # noqa: E402

from conftest import MB, peak_rss  # noqa: E402

SECRET_QUERY = "a query only the planted file has"


class Server:
    """``make_app`` on uvicorn in a thread, on a socket bound to port 0."""

    def __init__(self, **options):
        options.setdefault("max_envs", 2)
        self.app = make_app("sql", "sqlite", **options)
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, log_level="warning", **uvicorn_options(16 * MB))
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.05)

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        self.socket.close()
        assert not self.thread.is_alive()


@pytest.fixture
def server():
    served = Server()
    yield served
    served.close()


def raw_request(port: int, head: str, body: bytes = b"", read: int = 65536) -> str:
    """Send ``head`` (and ``body``) on a plain socket; what came back, as text."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head.encode() + body)
        chunks = []
        while True:
            try:
                chunk = conn.recv(read)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and b"}" in chunk:
                break
        return b"".join(chunks).decode("latin-1")


def assert_sentence(reply: requests.Response, status: int, words: str) -> None:
    assert reply.status_code == status, (reply.status_code, reply.text)
    detail = reply.json()["detail"]
    assert isinstance(detail, str) and words in detail and "Traceback" not in detail, detail


# -- tasks, never files ------------------------------------------------------------------

def test_a_client_names_a_task_of_the_set_never_a_file(server, tmp_path):
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps([{"id": "p1", "query": SECRET_QUERY, "gold": "SELECT 1", "db": "bookshop"}]))
    reply = requests.post(f"{server.url}/reset", json={"tasks": str(planted)}, timeout=30)
    assert_sentence(reply, 400, "never a file")
    assert SECRET_QUERY not in reply.text

    async def over_websocket() -> None:
        async with GenericEnvClient(base_url=server.url) as client:
            with pytest.raises(RuntimeError, match="never a file"):
                await client.reset(tasks=str(planted))
            assert (await client.reset(task="bookshop-01")).observation["task"] == "sql/bookshop-01"

    asyncio.run(over_websocket())


def test_dev_zero_is_never_read(server):
    with peak_rss() as rss:
        reply = requests.post(f"{server.url}/reset", json={"tasks": "/dev/zero"}, timeout=30)
        step = requests.post(f"{server.url}/step", json={"action": {"task": "/dev/zero", "code": "SELECT 1"}},
                             timeout=30)
    assert_sentence(reply, 400, "unknown reset argument(s) tasks")
    assert_sentence(step, 404, "no task '/dev/zero' in this set")
    assert rss.growth < 64 * MB


# -- bodies ------------------------------------------------------------------------------

def test_a_100_mb_body_is_refused_before_it_is_read(server):
    with peak_rss() as rss:
        declared = raw_request(server.port, f"POST /step HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                            f"Content-Type: application/json\r\nContent-Length: {100 * MB}\r\n\r\n",
                               b"x" * MB)
        chunk = b"x" * (64 * 1024)
        chunked_body = (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * 40      # 2.5 MB, no length said
        chunked = raw_request(server.port, f"POST /step HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                           "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                              chunked_body)
    for answer in (declared, chunked):
        assert answer.startswith("HTTP/1.1 413"), answer[:300]
        assert "over this server's limit of 1,048,576 bytes" in answer
    assert rss.growth < 64 * MB
    assert requests.get(f"{server.url}/health", timeout=30).status_code == 200


def test_a_websocket_message_over_the_cap_ends_the_socket(server):
    async def probe() -> int | None:
        async with ws_connect(server.ws_url, max_size=None) as ws:
            await ws.send(json.dumps({"type": "step", "data": {"code": "x" * (2 * MB)}}))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            return closed.value.rcvd.code if closed.value.rcvd else None

    assert asyncio.run(probe()) == 1009


# -- browsers and rebinding --------------------------------------------------------------

def test_another_sites_page_is_refused_over_http_and_websocket(server):
    reply = requests.post(f"{server.url}/reset", json={"task": "bookshop-01"},
                          headers={"Origin": "http://evil.example"}, timeout=30)
    assert_sentence(reply, 403, "http://evil.example")
    own = requests.post(f"{server.url}/reset", json={"task": "bookshop-01"},
                        headers={"Origin": server.url}, timeout=30)
    assert own.status_code == 200, own.text

    async def probe() -> None:
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(server.ws_url, origin="http://evil.example"):
                pass
        assert refused.value.response.status_code == 403
        with pytest.raises(InvalidStatus):
            async with ws_connect(server.ws_url, origin="null"):
                pass
        async with ws_connect(server.ws_url, origin=server.url) as ws:     # the server's own page
            await ws.send(json.dumps({"type": "reset", "data": {"task": "bookshop-01"}}))
            assert json.loads(await ws.recv())["type"] == "observation"

    asyncio.run(probe())


def test_a_foreign_host_header_is_refused(server):
    for path in ("GET /health", "POST /reset"):
        answer = raw_request(server.port, f"{path} HTTP/1.1\r\nHost: rebound.evil.example:{server.port}\r\n"
                                          "Content-Length: 0\r\nConnection: close\r\n\r\n")
        assert answer.startswith("HTTP/1.1 403") and "rebound.evil.example" in answer, answer[:300]
    handshake = (f"GET /ws HTTP/1.1\r\nHost: rebound.evil.example:{server.port}\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n")
    assert raw_request(server.port, handshake).startswith("HTTP/1.1 403")
    local = raw_request(server.port, f"GET /health HTTP/1.1\r\nHost: localhost:{server.port}\r\n"
                                     "Connection: close\r\n\r\n")
    assert local.startswith("HTTP/1.1 200"), local[:300]


# -- the token ---------------------------------------------------------------------------

def test_a_token_is_asked_for_over_http_and_websocket():
    served = Server(token="s3cret-token")
    try:
        assert_sentence(requests.get(f"{served.url}/health", timeout=30), 401, "Authorization: Bearer")
        assert_sentence(requests.get(f"{served.url}/health", headers={"Authorization": "Bearer wrong"},
                                     timeout=30), 401, "the token is wrong")
        good = {"Authorization": "Bearer s3cret-token"}
        assert requests.post(f"{served.url}/reset", json={"task": "bookshop-01"}, headers=good,
                             timeout=30).status_code == 200

        async def probe() -> None:
            with pytest.raises(ConnectionError, match="HTTP 401"):
                async with GenericEnvClient(base_url=served.url) as client:   # it sends no token
                    await client.reset(task="bookshop-01")
            async with ws_connect(served.ws_url, additional_headers=good) as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"task": "bookshop-01"}}))
                assert json.loads(await ws.recv())["type"] == "observation"

        asyncio.run(probe())
    finally:
        served.close()


def test_listening_beyond_loopback_needs_a_token():
    with pytest.raises(ValueError, match="needs a token"):
        make_app("sql", "sqlite", host="0.0.0.0")
    bad = subprocess.run([sys.executable, "-m", "icplay.cli", "serve-env", "--env", "sql", "--sandbox", "sqlite",
                          "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin"})
    assert bad.returncode != 0 and "needs a token" in bad.stderr and "Traceback" not in bad.stderr


# -- mistakes ----------------------------------------------------------------------------

def test_client_mistakes_are_4xx_with_one_sentence(server):
    assert_sentence(requests.post(f"{server.url}/reset", json={"task": "no-such-task"}, timeout=30), 404,
                    "no task 'no-such-task' in this set")
    assert_sentence(requests.post(f"{server.url}/step", json={"action": {"code": "SELECT 1"}}, timeout=30), 400,
                    "no episode: reset first")
    assert_sentence(requests.post(f"{server.url}/step", json={"action": {"cod": "x"}}, timeout=30), 422, "code")
    assert_sentence(requests.post(f"{server.url}/step", data=b"{not json",
                                  headers={"Content-Type": "application/json"}, timeout=30), 422, "not JSON")
    assert_sentence(requests.post(f"{server.url}/step", json={"action": {"task": "bookshop-01", "code": "SELECT 1",
                                                                         "then": ["submit", "SELECT 2"]}},
                                  timeout=30), 409, "the episode has ended")
    assert_sentence(requests.post(f"{server.url}/step", json={"action": {"code": "x", "then": ["y"] * 65}},
                                  timeout=30), 422, "then")


# -- sessions ----------------------------------------------------------------------------

def test_http_and_websocket_sessions_share_max_envs():
    served = Server(max_envs=1)
    try:
        async def probe() -> None:
            async with GenericEnvClient(base_url=served.url) as holder:
                await holder.reset(task="bookshop-01")
                busy = requests.post(f"{served.url}/reset", json={"task": "bookshop-01"}, timeout=30)
                assert_sentence(busy, 503, "--max-envs")
                step = requests.post(f"{served.url}/step", json={"action": {"task": "bookshop-01", "code": "SELECT 1"}},
                                     timeout=30)
                assert step.status_code == 503
                async with ws_connect(served.ws_url) as second:
                    refused = json.loads(await second.recv())
                assert refused["data"]["code"] == "CAPACITY_REACHED" and refused["data"]["max_sessions"] == 1
            # the holder has gone: its place is free again
            deadline = time.monotonic() + 30
            while (reply := requests.post(f"{served.url}/reset", json={"task": "bookshop-01"},
                                          timeout=30)).status_code == 503:
                assert time.monotonic() < deadline, "the WebSocket's place was never given back"
                await asyncio.sleep(0.05)
            assert reply.status_code == 200

        asyncio.run(probe())
    finally:
        served.close()


def test_no_mcp_sessions_to_open_or_close(server):
    create = {"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 1}
    assert requests.post(f"{server.url}/mcp", json=create, timeout=30).status_code == 404

    async def probe() -> None:
        async with GenericEnvClient(base_url=server.url) as owner:
            await owner.reset(task="bookshop-01")
            async with ws_connect(server.ws_url) as other:
                # its own id first (OpenEnv's MCP over the WebSocket), then another's close
                await other.send(json.dumps({"type": "mcp", "data": create}))
                own = json.loads(await other.recv())
                assert own["type"] == "error", own
                for target in ("*", "00000000-0000-0000-0000-000000000000"):
                    close = {"jsonrpc": "2.0", "method": "openenv/session/close", "params": {"session_id": target},
                             "id": 2}
                    await other.send(json.dumps({"type": "mcp", "data": close}))
                    assert json.loads(await other.recv())["type"] == "error"
            step = await owner.step({"code": "SELECT 1"})     # the owner's session is untouched
            assert step.observation["output"]

    asyncio.run(probe())


def test_a_second_client_cannot_close_the_first_ones_session_through_openenv_mcp(server):
    """On OpenEnv's own server a client learned its session id over MCP and any other client
    could close that session by it; here there is no such message at all."""
    async def probe() -> None:
        async with ws_connect(server.ws_url) as first, ws_connect(server.ws_url) as second:
            await first.send(json.dumps({"type": "reset", "data": {"task": "bookshop-01"}}))
            assert json.loads(await first.recv())["type"] == "observation"
            await first.send(json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "params": {},
                                                                 "method": "openenv/session/create"}}))
            answer = json.loads(await first.recv())
            session_id = ((answer.get("data") or {}).get("result") or {}).get("session_id") or "unknown"
            await second.send(json.dumps({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 2, "params": {
                "session_id": session_id}, "method": "openenv/session/close"}}))
            await second.recv()
            await first.send(json.dumps({"type": "step", "data": {"code": "SELECT title FROM books"}}))
            after = json.loads(await first.recv())
            assert after["type"] == "observation" and "Falling Upward" in after["data"]["observation"]["output"]

    asyncio.run(probe())


def test_a_silent_websocket_expires_and_frees_its_place():
    served = Server(max_envs=1, idle_timeout=1.0)
    try:
        async def probe() -> None:
            async with ws_connect(served.ws_url) as idle:
                await idle.send(json.dumps({"type": "reset", "data": {"task": "bookshop-01"}}))
                assert json.loads(await idle.recv())["type"] == "observation"
                expired = json.loads(await asyncio.wait_for(idle.recv(), 60))
                assert expired["data"]["code"] == "SESSION_EXPIRED" and "connect again" in expired["data"]["message"]
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(idle.recv(), 60)
            async with GenericEnvClient(base_url=served.url) as next_client:
                assert (await next_client.reset(task="bookshop-01")).observation["task"] == "sql/bookshop-01"

        asyncio.run(probe())
    finally:
        served.close()


# -- the second audit's leftovers: a Host with a user name, a seed that is not a number, a key twice --

def test_a_host_header_with_a_user_name_is_refused(server):
    """``evil@127.0.0.1`` reads as user ``evil`` at loopback to a URL parser: a Host is a name and a port."""
    for host in (f"evil@127.0.0.1:{server.port}", f"127.0.0.1:{server.port}/x", "127.0.0.1 evil"):
        answer = raw_request(server.port, f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        assert answer.startswith("HTTP/1.1 403") and "a name and a port" in answer, (host, answer[:300])
    for host in (f"127.0.0.1:{server.port}", f"[::1]:{server.port}", "localhost"):
        answer = raw_request(server.port, f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        assert answer.startswith("HTTP/1.1 200"), (host, answer[:300])


def test_a_seed_must_be_a_number(server):
    for seed in (True, "7", 1.5):
        reply = requests.post(f"{server.url}/reset", json={"task": "bookshop-01", "seed": seed}, timeout=30)
        assert reply.status_code == 422 and "seed" in reply.text, (seed, reply.status_code, reply.text[:300])
    assert requests.post(f"{server.url}/reset", json={"seed": 7}, timeout=30).status_code == 200

    async def probe() -> None:
        async with ws_connect(server.ws_url) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": True}}))
            answer = json.loads(await ws.recv())
            assert answer["type"] == "error" and "seed" in answer["data"]["message"], answer

    asyncio.run(probe())


def test_a_key_stated_twice_is_refused_over_http_and_websocket(server):
    """JSON leaves it to each reader which of two keys counts (Python's takes the last)."""
    body = b'{"task": "bookshop-01", "seed": 1, "task": "bookshop-02"}'
    answer = raw_request(server.port, f"POST /reset HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                      f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                                      "Connection: close\r\n\r\n", body)
    assert answer.startswith("HTTP/1.1 400") and "task is stated twice" in answer, answer[:400]
    nested = b'{"action": {"code": "SELECT 1", "code": "DROP TABLE books"}}'
    answer = raw_request(server.port, f"POST /step HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                      f"Content-Type: application/json\r\nContent-Length: {len(nested)}\r\n"
                                      "Connection: close\r\n\r\n", nested)
    assert answer.startswith("HTTP/1.1 400") and "action.code is stated twice" in answer, answer[:400]

    async def probe() -> None:
        async with ws_connect(server.ws_url) as ws:
            await ws.send('{"type": "reset", "data": {"task": "bookshop-01", "task": "bookshop-02"}}')
            answer = json.loads(await ws.recv())
            assert answer["type"] == "error" and "data.task twice" in answer["data"]["message"], answer
            await ws.send(json.dumps({"type": "reset", "data": {"task": "bookshop-01"}}))
            assert json.loads(await ws.recv())["type"] == "observation"     # the session goes on

    asyncio.run(probe())
