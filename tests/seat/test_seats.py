"""Seats and the gate in front of textual-serve, over real HTTP (aiohttp's test server):
tokens are stored hashed, compared in constant time, and anything without one gets 401."""

from __future__ import annotations

import os
import re
import stat

import pytest
from aiohttp.test_utils import TestClient, TestServer

from icplay.seat.commands import SeatCommands
from icplay.seat.server import UNAUTHORIZED, SeatServer
from icplay.seat.study import seats_of
from icplay.study.seats import ANNOTATOR, SUPERVISOR, Seat, SeatFileError, Seats, digest_of

from seat_helpers import make_study


def test_tokens_are_stored_hashed_and_reissue_revokes(tmp_path):
    seats = Seats(tmp_path / "seats.json")
    ada = seats.issue("ada")
    sam = seats.issue("sam", SUPERVISOR)
    text = (tmp_path / "seats.json").read_text()
    assert ada not in text and sam not in text
    assert digest_of(ada) in text and digest_of(sam) in text
    assert stat.S_IMODE((tmp_path / "seats.json").stat().st_mode) == 0o600
    again = Seats(tmp_path / "seats.json")                       # read back from the file
    assert again.seat_of(ada) == Seat("ada", ANNOTATOR) and again.seat_of(sam) == Seat("sam", SUPERVISOR)
    assert again.seat_of(ada[:-1] + ("A" if ada[-1] != "A" else "B")) is None
    assert again.seat_of("") is None and again.seat_of(None) is None and again.seat_of("x" * 10_000) is None
    new = again.issue("ada")
    assert again.seat_of(ada) is None and again.seat_of(new) == Seat("ada")
    assert [s.name for s in Seats(tmp_path / "seats.json").seats] == ["sam", "ada"]


def test_two_token_makers_at_once_never_undo_a_revoke(tmp_path):
    path = tmp_path / "seats.json"
    leaked = Seats(path).issue("ada")
    first, second = Seats(path), Seats(path)           # two `icplay serve tokens` started together
    new = first.issue("ada")                           # ada's link leaked: revoked by a new one
    bo = second.issue("bo")                            # the other knew the seats from before
    seats = Seats(path)
    assert seats.seat_of(leaked) is None and seats.seat_of(new) == Seat("ada") and seats.seat_of(bo) == Seat("bo")


def test_a_rewrite_keeping_the_files_time_and_size_still_counts(tmp_path):
    path = tmp_path / "seats.json"
    leaked = Seats(path).issue("ada")
    server = Seats(path)
    assert server.seat_of(leaked) == Seat("ada")
    before = path.stat()
    with open(path, "r+") as file:                     # in place, same size, within one clock tick
        text = file.read().replace(digest_of(leaked), digest_of("a-new-token"))
        file.seek(0)
        file.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert server.seat_of(leaked) is None and server.seat_of("a-new-token") == Seat("ada")


@pytest.mark.parametrize("left", ["a file open to all", "a symlink"])
def test_the_seats_file_is_the_owners_alone_whatever_was_left_beside_it(tmp_path, left):
    path, elsewhere = tmp_path / "seats.json", tmp_path / "elsewhere"
    elsewhere.write_text("not the seats")
    planted = tmp_path / "seats.json.tmp"             # the name the temporary file used to have
    if left == "a symlink":
        planted.symlink_to(elsewhere)
    else:
        planted.write_text("")
        planted.chmod(0o666)
    umask = os.umask(0)                                # as root with no umask at all
    try:
        token = Seats(path).issue("ada")
    finally:
        os.umask(umask)
    assert not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert elsewhere.read_text() == "not the seats" and Seats(path).seat_of(token) == Seat("ada")


def test_a_seats_file_others_may_write_lets_nobody_in(tmp_path):
    path = tmp_path / "seats.json"
    token = Seats(path).issue("ada")
    path.chmod(0o622)                                  # whoever may write it could give themselves a seat
    with pytest.raises(SeatFileError) as caught:
        Seats(path).seat_of(token)
    assert "others may write the seats (mode 622)" in str(caught.value) and "chmod 600" in str(caught.value)


@pytest.mark.parametrize("content, field", [
    ("[1]", "'seats' must be a list"),
    ('{"seats": [{"name": "ada", "sha256": "abc"}]}', "seats[0]: field 'sha256'"),
    ('{"seats": [{"name": "ada", "role": "boss", "sha256": "' + "0" * 64 + '"}]}', "seats[0]: field 'role'"),
    ('{"seats": [{"sha256": "' + "0" * 64 + '"}]}', "seats[0]: field 'name'"),
    ("{", "cannot read the seats"),
])
def test_a_bad_seats_file_is_one_sentence(tmp_path, content, field):
    path = tmp_path / "seats.json"
    path.write_text(content)
    with pytest.raises(SeatFileError) as caught:
        Seats(path)
    assert str(path) in str(caught.value) and field in str(caught.value) and "\n" not in str(caught.value)


@pytest.fixture
async def gate():
    make_study("pilot")
    seats = seats_of("pilot")
    tokens = {"ada": seats.issue("ada"), "sam": seats.issue("sam", SUPERVISOR)}
    server = SeatServer(seats, SeatCommands("pilot", play=("sql",)), "http://127.0.0.1:8123")
    client = TestClient(TestServer(server.application()))
    await client.start_server()
    yield client, tokens, server
    await client.close()


WEBSOCKET = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


async def assert_401(response) -> None:
    assert response.status == 401
    assert await response.text() == UNAUTHORIZED
    assert "Set-Cookie" not in response.headers


@pytest.mark.parametrize("path", ["/", "/ws", "/static/js/textual.js", "/static/css/xterm.css", "/ws/follow/x",
                                  "/download/abc", "/no/such/page", "/?fontsize=20"])
async def test_without_a_token_everything_is_401(gate, path):
    client, tokens, server = gate
    await assert_401(await client.get(path, allow_redirects=False))
    await assert_401(await client.get(path, headers=WEBSOCKET, allow_redirects=False))
    await assert_401(await client.get(path, cookies={server.cookie: tokens["ada"] + "x"}, allow_redirects=False))
    await assert_401(await client.get(path, headers={"Authorization": f"Bearer {tokens['ada']}"},
                                      allow_redirects=False))     # the only ways in: the link and its cookie


async def test_a_wrong_token_in_the_link_is_401_and_sets_nothing(gate):
    client, tokens, server = gate
    await assert_401(await client.get("/?token=" + tokens["ada"][::-1], allow_redirects=False))
    await assert_401(await client.get("/?token=", allow_redirects=False))


async def test_the_link_becomes_a_cookie_and_the_token_leaves_the_url(gate):
    client, tokens, server = gate
    response = await client.get(f"/?token={tokens['ada']}&fontsize=18", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/?fontsize=18"
    cookie = response.cookies[server.cookie]
    assert cookie.value == tokens["ada"] and cookie["httponly"] and cookie["samesite"] == "Strict"
    assert response.headers["Referrer-Policy"] == "no-referrer" and response.headers["Cache-Control"] == "no-store"
    page = await client.get("/", cookies={server.cookie: tokens["ada"]})
    text = await page.text()
    assert page.status == 200 and 'data-session-websocket-url="ws://127.0.0.1:8123/ws"' in text
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert tokens["ada"] not in text and "icplay · ada" in text and "googleapis" not in text
    static = await client.get("/static/js/textual.js", cookies={server.cookie: tokens["ada"]})
    assert static.status == 200 and len(await static.read()) > 10_000


async def test_the_websocket_checks_origin_and_role(gate):
    client, tokens, server = gate
    ada, sam = {server.cookie: tokens["ada"]}, {server.cookie: tokens["sam"]}
    other_site = await client.get("/ws", headers={**WEBSOCKET, "Origin": "http://evil.example"}, cookies=ada)
    assert other_site.status == 403
    supervisor_plays = await client.get("/ws", headers={**WEBSOCKET, "Origin": server.origin}, cookies=sam)
    assert supervisor_plays.status == 403
    annotator_follows = await client.get("/ws/follow/x", headers={**WEBSOCKET, "Origin": server.origin}, cookies=ada)
    assert annotator_follows.status == 403
    unknown = await client.get("/ws/follow/../../etc/passwd", headers={**WEBSOCKET, "Origin": server.origin},
                               cookies=sam)
    assert unknown.status == 404


async def test_a_supervisor_sees_a_list_not_an_app(gate):
    client, tokens, server = gate
    page = await client.get("/", cookies={server.cookie: tokens["sam"]})
    text = await page.text()
    assert page.status == 200 and "supervisor, read-only" in text and "websocket" not in text


def test_the_command_comes_from_the_seat_quoted():
    commands = SeatCommands("pilot")
    line = commands.for_seat(Seat("ada; rm -rf /"))
    assert "--study pilot" in line and "'ada; rm -rf /'" in line
    with pytest.raises(ValueError):
        commands.for_seat(Seat("sam", SUPERVISOR))


def test_serve_tokens_makes_one_per_annotator_of_the_study_shown_once(capsys):
    from icplay.cli import main

    make_study("pilot")
    assert main(["serve", "tokens", "--study", "pilot", "--supervisor", "sam", "--port", "8130"]) == 0
    out = capsys.readouterr().out
    links = re.findall(r"^\s+(\w+) \((\w+)\)\s+http://127\.0\.0\.1:8130/\?token=(\S+)$", out, re.M)
    assert [(name, role) for name, role, _ in links] == [("ada", ANNOTATOR), ("bo", ANNOTATOR), ("sam", SUPERVISOR)]
    seats = seats_of("pilot")
    assert [seats.seat_of(token) for _, _, token in links] == [Seat("ada"), Seat("bo"), Seat("sam", SUPERVISOR)]
    assert not any(token in seats.path.read_text() for _, _, token in links)


@pytest.mark.parametrize("argv, says", [
    (["serve", "tokens", "--study", "nope"], "no such study file"),
    (["serve", "--study", "pilot"], "has no seats yet: make their tokens with `icplay serve tokens --study pilot`"),
    (["serve"], "name the study: --study NAME"),
    (["view", "--follow", "no/such/episode"], "--follow no/such/episode: no such trajectory file"),
])
def test_serve_and_follow_refuse_in_one_sentence(capsys, argv, says):
    from icplay.cli import main

    make_study("pilot")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


async def test_tokens_made_or_revoked_while_serving_count_at_the_next_request(gate):
    client, tokens, server = gate
    elsewhere = Seats(server.seats.path)                  # `icplay serve tokens` in another process
    new = elsewhere.issue("ada")
    await assert_401(await client.get("/", cookies={server.cookie: tokens["ada"]}))
    assert (await client.get("/", cookies={server.cookie: new})).status == 200
    server.seats.path.write_text('{"seats": 3}')           # a file gone bad: everyone is refused, nobody let in
    await assert_401(await client.get("/", cookies={server.cookie: new}))


@pytest.mark.parametrize("host, warns", [("127.0.0.1", False), ("::1", False), ("localhost", False),
                                         ("0.0.0.0", True), ("192.168.1.20", True)])
def test_listening_beyond_this_machine_without_tls_warns(monkeypatch, capsys, host, warns):
    import icplay.seat.server as server_module
    from icplay.cli import main

    make_study("pilot")
    seats_of("pilot").issue("ada")
    served = []
    monkeypatch.setattr(server_module, "serve", lambda server, h, port, say: served.append((server.public_url, h)))
    assert main(["serve", "--study", "pilot", "--host", host, "--port", "8140"]) == 0
    assert served and served[0][1] == host
    assert ("without TLS" in capsys.readouterr().err) is warns
    served.clear()
    assert main(["serve", "--study", "pilot", "--host", host, "--public-url", "https://seats.example.org/"]) == 0
    assert served[0][0] == "https://seats.example.org" and "without TLS" not in capsys.readouterr().err


def test_without_textual_serve_serve_names_its_extra_and_a_pip_command_that_installs_it(monkeypatch):
    """The hint installs the extra's own packages into this Python: it works for a local wheel
    or a checkout (``pip install 'icplay[serve]'`` asks an index for icplay itself)."""
    import builtins
    import sys

    from icplay.commands.serve import run
    from icplay.process import UserError

    real_import = builtins.__import__

    def no_textual_serve(name, *args, **kwargs):
        if name.startswith(("textual_serve", "icplay.seat.server")):
            raise ModuleNotFoundError(f"No module named {name!r}", name="textual_serve")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "icplay.seat.server", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_textual_serve)
    with pytest.raises(UserError) as said:
        run(type("Args", (), {"study": "pilot"})())
    message = str(said.value)
    assert "'serve' extra" in message and "textual_serve is missing" in message
    assert message.endswith(f"{sys.executable} -m pip install 'textual-serve>=1.1.3'"), message
    assert "icplay[serve]" not in message
