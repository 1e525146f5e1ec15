"""The screen's edges a new user finds: a terminal too small for the editors, a submit that scores
someone else's turn or a mistyped flag, hints that name the wrong key, code shown without colour,
the viewer's help and its turn count. Real SQLite (and bwrap for Bash and CTF), the real openai
client against the local fake server, keys through Pilot."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rich.text import Text

from icplay.frontend.config import AgentChoice
from icplay.tui.screens.modals import ConfirmScreen, HelpScreen
from icplay.tui.screens.view import ViewScreen
from icplay.tui.screens.view_episode import CompareScreen, EpisodeScreen

sys.path.insert(0, str(Path(__file__).parent.parent / "agents"))

from fake_openai_server import FakeOpenAIServer, Script, fenced  # noqa: E402

from test_play_sql import run_sql  # noqa: E402
from test_watch import turns, wait_request, watch  # noqa: E402
from tui_helpers import play_screen, text_of, type_text, viewer_apps, viewer_loaded, wait_for, wait_ready  # noqa: E402
from view_fixtures import record_sql  # noqa: E402


def coloured(text: Text) -> bool:
    """Whether some span of ``text`` has a foreground colour set by the highlighter (a Style
    object from Pygments' tokens; the screens' own styles are named strings)."""
    from rich.style import Style

    return any(isinstance(span.style, Style) and span.style.color is not None for span in text.spans)


def content(widget) -> Text:
    shown = widget.content
    assert isinstance(shown, Text), shown
    return shown


@pytest.fixture
def fake_server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    servers = []

    def start(replies) -> FakeOpenAIServer:
        server = FakeOpenAIServer(Script(replies, then="submit")).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def agent(server, mode="confirm") -> AgentChoice:
    return AgentChoice(policy="llm", model="fake-model", base_url=server.url, mode=mode)


# -- small terminals ---------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(64, 20), (40, 12)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_sql_screen_at_a_small_size_runs_a_query(make_app, shop_catalog, size):
    """At 64x20 the editor was squeezed to width 0 and its placeholder's wrap raised (the app died)."""
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test(size=size) as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, "SELECT name FROM customers ORDER BY name")
        assert play_screen(app).query_one("#editor").region.width > 0


@pytest.mark.parametrize("size", [(60, 20), (40, 12)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_sql_watch_screen_at_a_small_size_approves_a_proposal(make_app, shop_catalog, fake_server, size):
    fake = fake_server([fenced("SELECT name FROM customers")])
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None, watch=agent(fake))
    async with app.run_test(size=size) as pilot:
        await wait_request(pilot, "proposal")
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the approved turn")


# -- what a submit scores --------------------------------------------------------------------------

async def test_the_play_submit_confirmation_names_and_shows_the_scored_turn(make_app, shop_catalog):
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        await run_sql(pilot, "SELECT name FROM customers")
        await run_sql(pilot, "SELECT 'Zed' AS who")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "the confirmation")
        question = text_of(app.screen.query_one("#question"))
        assert "after 2 turns" in question
        assert "Scored: the rows of the last query — turn 2 (yours):" in question
        assert "> SELECT 'Zed' AS who" in question and "Zed" in question.split("> SELECT 'Zed' AS who")[1]
        await pilot.press("escape")


async def test_the_agents_submit_after_a_hand_back_says_it_scores_the_humans_turn(make_app, shop_catalog,
                                                                                  fake_server):
    fake = fake_server([fenced("SELECT name FROM customers"), "submit"])
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None, watch=agent(fake))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        await pilot.press("ctrl+y")                                          # the agent's turn 1
        await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the agent's turn")
        await wait_request(pilot, "submit")
        await pilot.press("f7")                                              # take over
        await wait_request(pilot, "action")
        editor = watch(app).pane.editor
        editor.load_text("SELECT 'mine' AS answer")
        editor.move_cursor(editor.document.end)
        await pilot.press("f5")
        await wait_for(pilot, lambda: len(turns(app)) == 2, 20, "the human's turn")
        await wait_request(pilot, "action")
        await pilot.press("ctrl+s")                                          # the human's own submit: confirmed
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "the confirmation")
        assert "turn 2 (yours)" in text_of(app.screen.query_one("#question"))
        await pilot.press("escape")
        await wait_request(pilot, "action")
        await pilot.press("f7")                                              # hand back: the agent submits
        await wait_request(pilot, "submit")
        body = text_of(watch(app).panel.query_one("#agent-body"))
        assert "Scored: the rows of the last query — turn 2 (yours):" in body
        assert "The agent submits your turn's result" in body and "> SELECT 'mine' AS answer" in body
        await pilot.press("f12")
        await wait_for(pilot, lambda: watch(app).state == "stopped", 20, "the stop")


async def typo_flag_confirmed_then_cancelled(pilot) -> None:
    """Type a flag with a typo in the focused flag field and press Enter: the confirmation
    shows it; Escape, and the typo can be mended."""
    await type_text(pilot, "picoCTF{typo_here}")
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), 10, "the confirmation")
    assert "Scored: the flag “picoCTF{typo_here}”" in text_of(pilot.app.screen.query_one("#question"))
    await pilot.press("escape")


@pytest.mark.usefixtures("bwrap_ready")
async def test_the_ctf_confirmation_shows_the_flag_being_submitted(make_app):
    app = make_app(env="ctf", tasks="ctf", task="base64-note")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_ready(pilot)
        play_screen(app).query_one("#flag").focus()
        await typo_flag_confirmed_then_cancelled(pilot)
        assert play_screen(app).state == "ready"


@pytest.mark.usefixtures("bwrap_ready")
async def test_a_flag_typed_after_taking_over_from_the_agent_is_confirmed_first(make_app, fake_server):
    """In watch, the human who took the turn and types a flag gets the same confirmation as in
    play, showing the flag; cancelled, nothing is submitted, and the next submit is their own."""
    fake = fake_server([fenced("ls /ctf", "bash"), "submit picoCTF{agents_guess}"])
    app = make_app(env="ctf", tasks="ctf", task="base64-note", watch=agent(fake))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        await pilot.press("f7")                                              # take over
        await wait_request(pilot, "action")
        watch(app).query_one("#flag").focus()
        await typo_flag_confirmed_then_cancelled(pilot)
        await wait_request(pilot, "action")
        assert watch(app).over is None and watch(app).submit_arg is None
        await pilot.press("f12")
        await wait_for(pilot, lambda: watch(app).state == "stopped", 20, "the stop")


# -- hints and colours ---------------------------------------------------------------------------

@pytest.mark.parametrize("env,key", [("sql", "F5"), ("bash", "Enter")])
async def test_the_edit_hint_names_the_key_that_runs_the_edit(make_app, shop_catalog, fake_server, env, key, request):
    if env == "bash":
        request.getfixturevalue("bwrap_ready")
        fake = fake_server([fenced("ls /testbed", "bash")])
        app = make_app(env="bash", tasks="bash", task="b001", watch=agent(fake))
    else:
        fake = fake_server([fenced("SELECT name FROM customers")])
        app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None, watch=agent(fake))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        await pilot.press("ctrl+e")
        hint = text_of(watch(app).panel.query_one("#agent-hint"))
        assert f"{key} runs it as edited" in hint
        await pilot.press("f12")
        await wait_for(pilot, lambda: watch(app).state == "stopped", 20, "the stop")


async def test_the_proposal_and_the_sidebar_are_highlighted(make_app, shop_catalog, fake_server):
    fake = fake_server([fenced("SELECT name FROM customers"), fenced("SELECT 1")])
    app = make_app(env="sql", catalog=shop_catalog(), task="s1", sandbox=None, watch=agent(fake))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_request(pilot, "proposal")
        proposal = [part for part in watch(app).panel.body().renderables
                    if isinstance(part, Text) and "SELECT" in part.plain]
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: len(turns(app)) == 1, 20, "the approved turn")
        line = watch(app).turn_list.get_option_at_index(0).prompt
        await pilot.press("f12")
        await wait_for(pilot, lambda: watch(app).state == "stopped", 20, "the stop")
    assert len(proposal) == 1 and proposal[0].plain == "SELECT name FROM customers" and coloured(proposal[0])
    start = line.plain.index("SELECT name")
    assert coloured(line[start:start + len("SELECT name")])


def test_the_highlighter_colours_each_language_and_leaves_unknown_ones_plain():
    from icplay.tui.highlight import highlighted

    for code, language in [("SELECT 1", "sql"), ("ls -l | wc", "bash"), ("def f(): return 1", "python"),
                           ("cat flag.txt", "ctf")]:
        text = highlighted(code, language)
        assert text.plain == code and coloured(text) and not text.no_wrap, language   # long code wraps
    assert not coloured(highlighted("SELECT 1", "no-such-language"))


# -- the viewer ---------------------------------------------------------------------------------

@pytest.fixture
def view_app(home):
    yield from viewer_apps(home, record_sql)


async def test_f1_in_the_viewer_lists_the_viewers_keys(view_app):
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await viewer_loaded(pilot)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        shown = text_of(app.screen.query_one("VerticalScroll Static"))
        assert "Episode browser" in shown and "Fork: agent goes on" in shown and "Re-execute" in shown
        assert "Submit the task" not in shown and "Bash command line" not in shown
        await pilot.press("escape")
        assert isinstance(app.screen, ViewScreen)


async def test_the_stepper_and_the_comparison_highlight_the_code_and_count_turns_as_the_header(view_app):
    app = view_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await viewer_loaded(pilot)
        await pilot.press("enter")                                          # the agent's episode
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodeScreen), 10, "the stepper")
        screen = app.screen
        assert "2 turns" in text_of(screen.query_one("#status"))
        assert text_of(screen.query_one("#turn-head")).startswith("Turn 1 of 2")
        assert coloured(content(screen.query_one("#action")))
        await pilot.press("right")                                          # the rejected proposal
        assert text_of(screen.query_one("#turn-head")).startswith("Proposal, not a turn (after turn 1 of 2)")
        await pilot.press("right")
        assert text_of(screen.query_one("#turn-head")).startswith("Turn 2 of 2")
        numbers = [screen.query_one("#steps").get_option_at_index(i).prompt.plain.split()[0] for i in range(3)]
        assert numbers == ["1", "–", "2"]
        await pilot.press("escape")
        await pilot.press("space", "down", "down", "c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), 10, "the comparison")
        cell = content(app.screen.query(".compare-row")[0].query(".half")[0])
        assert coloured(cell)
