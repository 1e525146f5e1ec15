"""Fresh probes of issue 28's doors by an outside audit (inputs the other hostile suites do not
try): serve-env WebSocket messages JSON cannot hold, saved files with odd numbers and keys, ...

Each test names the door, the input, and what must hold."""

from __future__ import annotations

import asyncio
import json

import pytest


# -- serve-env: a WebSocket message the JSON reader chokes on ---------------------------------

def _serve():
    pytest.importorskip("openenv.core", reason="openenv-core is not installed (pip install 'icplay[openenv]')")
    from test_serve_env import Server
    return Server()


async def _ws_exchange(url: str, messages: list[str]) -> list[dict]:
    from websockets.asyncio.client import connect as ws_connect
    answers = []
    async with ws_connect(url) as conn:
        for message in messages:
            await conn.send(message)
            answers.append(json.loads(await asyncio.wait_for(conn.recv(), 60)))
    return answers


@pytest.mark.parametrize("message", [
    '{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}",       # over Python's 4300-digit int limit
    "[" * 200_000,                                                   # RecursionError in json.loads
], ids=["5000-digit-seed", "200k-brackets"])
def test_a_websocket_message_json_cannot_hold_is_an_error_the_session_survives(message):
    server = _serve()
    try:
        answers = asyncio.run(_ws_exchange(server.ws_url, [message, '{"type": "state"}']))
    finally:
        server.close()
    assert answers[0]["type"] == "error" and answers[0]["data"]["code"] == "INVALID_JSON"
    assert "Traceback" not in answers[0]["data"]["message"]
    assert answers[1]["type"] == "state"                               # the same session answers on


@pytest.mark.parametrize("seed", ['"abc"', "[1]", "-5", "1.5", "NaN"])
def test_a_websocket_reset_checks_its_seed_as_http_reset_does(seed):
    server = _serve()
    try:
        answer, = asyncio.run(_ws_exchange(server.ws_url, ['{"type": "reset", "data": {"seed": %s}}' % seed]))
    finally:
        server.close()
    assert answer["type"] == "error" and answer["data"]["code"] == "VALIDATION_ERROR", answer
    assert "seed" in answer["data"]["message"]
