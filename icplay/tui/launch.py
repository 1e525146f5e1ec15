"""``run_app(args)``: what ``icplay play`` calls when ``--plain`` is not given.

``args`` carries ``env`` (bash | sql | None), ``tasks`` (a set name or a task file),
``task`` (an id), ``sandbox``, ``session`` (a baseline session name), ``image``, and
optionally ``out`` (the folder for the session's trajectories) and ``strict``.
Problems the user can fix (an unknown set or task id, a bad config file) are raised as
the CLI's user errors before the screen is taken over, so they print as one line.
"""

from __future__ import annotations

import asyncio
import os
import contextlib
import sys

from icplay.process import Shutdown, UserError
from icplay.tasks.model import TaskFileError
from icplay.frontend.config import AgentChoice, ConfigError, agent_choice, load_config, resolve_annotator
from icplay.tui.app import Catalog, PlayApp
from icplay.driver import Limits
from icplay.session import Session
from icplay.frontend.policies import PolicyError, checked_choice


def check_terminal() -> None:
    """The app needs a terminal on stdin and stdout; without one Textual would spin a core
    forever waiting for one. Say so in one line instead. Under textual-serve (``icplay serve``)
    the pipes are the browser's terminal: Textual's web driver speaks over them."""
    if os.environ.get("TEXTUAL_DRIVER", "").endswith("web_driver:WebDriver"):
        return
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
               if stream is None or not _isatty(stream)]
    if missing:
        raise UserError(f"the playground needs a terminal ({' and '.join(missing)} "
                        f"{'is' if len(missing) == 1 else 'are'} not one): use `icplay play bash --plain` "
                        "or `icplay play sql --plain` for line mode")


@contextlib.contextmanager
def quit_on_shutdown_signal(app):
    """SIGTERM/SIGHUP quit the app as its quit key does (screens save, the terminal is
    given back), instead of an exception raised into Textual's event loop."""
    shutdown = Shutdown.current

    def deliver() -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        loop.call_soon_threadsafe(app.exit)
        return True

    if shutdown is not None:
        shutdown.deliver = deliver
    try:
        yield
    finally:
        if shutdown is not None:
            shutdown.deliver = None


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def run_until_quit(app) -> int:
    """Run an app on this terminal (one line if there is none) until it quits; its envs closed after."""
    check_terminal()
    try:
        with quit_on_shutdown_signal(app):
            app.run()
    finally:
        app.close_envs()
    return app.return_code or 0


def app_annotator(args, config) -> str | None:
    """``--annotator``, else $ICPLAY_ANNOTATOR / config.toml (the app says when there is none)."""
    try:
        return resolve_annotator(getattr(args, "annotator", None), config)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def run_app(args) -> int:
    env = getattr(args, "env", None)
    tasks = getattr(args, "tasks", None)
    task_id = getattr(args, "task", None)
    try:
        config = load_config()
    except ConfigError as exc:
        raise TaskFileError(str(exc).split(":", 1)[0], str(exc).split(":", 1)[1].strip()) from None
    if getattr(args, "strict", False):
        config.strict = True
    annotator = app_annotator(args, config)
    catalog = Catalog(env, tasks)
    if task_id is not None:
        catalog.find(str(task_id), catalog.default_set(env, tasks))   # fail early, in one line
    app = PlayApp(env=env, tasks=tasks, task=None if task_id is None else str(task_id),
                  sandbox=getattr(args, "sandbox", None), session=getattr(args, "session", None),
                  image=getattr(args, "image", None), config=config, catalog=catalog,
                  out=getattr(args, "out", None), annotator=annotator, annotator_note=True)
    return run_until_quit(app)


def run_study_app(args, queue, agent: AgentChoice | None = None, max_turns: int | None = None) -> int:
    """``icplay play --study NAME --annotator A``: the app on A's queue (``queue``, an
    ``icplay.study.queue.Queue``), under the study's rules (strict mode hides the schema).
    With ``agent`` (``icplay watch --study``) the agent works each task, A supervises."""
    try:
        config = load_config()
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    config.strict = config.strict or queue.study.rules.strict
    app = PlayApp(sandbox=getattr(args, "sandbox", None), image=getattr(args, "image", None), config=config,
                  task=getattr(args, "task", None), annotator=queue.annotator, study=queue, watch=agent,
                  watch_limits=Limits(max_turns=max_turns) if max_turns else None)
    return run_until_quit(app)


def run_watch(args, policy=None, policy_info: dict | None = None, tasks: list | None = None) -> int:
    """What ``icplay watch`` calls without ``--plain``: the watch screen.

    ``args`` is watch's parsed command line (env, tasks, task, policy, model, base_url,
    strategy, mode, protocol, turns, sandbox, image, session, out); ``policy`` proposes (an
    ``icplay.episode.Policy``, built by icplay.commands.watch), ``policy_info`` describes it
    for the trajectory, ``tasks`` are the tasks it can play. Without a ``policy`` the screen
    builds one from the options, the last use and config.toml's ``[agent]``. Without
    ``--task`` the first task the watch session has not submitted opens; with it, that task only
    (Ctrl+N offers no next one). The screen drives
    each episode with ``icplay.driver.Driver`` (docs/driver.md).
    """
    env = getattr(args, "env", None)
    task_set = getattr(args, "tasks", None)
    task_id = getattr(args, "task", None)
    try:
        config = load_config()
    except ConfigError as exc:
        raise TaskFileError(str(exc).split(":", 1)[0], str(exc).split(":", 1)[1].strip()) from None
    agent = _watch_agent(args, config, policy, policy_info)
    catalog = Catalog(env, task_set)
    if task_id is None and tasks:
        task_id = _first_unsubmitted(args, tasks)
    if task_id is not None:
        catalog.find(str(task_id), catalog.default_set(env, task_set))   # fail early, in one line
    turns = getattr(args, "turns", None)
    app = PlayApp(env=env, tasks=task_set, task=None if task_id is None else str(task_id),
                  sandbox=getattr(args, "sandbox", None), session=None, image=getattr(args, "image", None),
                  config=config, catalog=catalog, out=getattr(args, "out", None), watch=agent,
                  watch_session=getattr(args, "session", None),
                  watch_policy=None if policy is None else (policy, policy_info or {}),
                  watch_limits=Limits(max_turns=turns) if turns else None,
                  annotator=app_annotator(args, config), annotator_note=True)
    app.only_task = None if getattr(args, "task", None) is None else str(task_id)   # --task: that one only
    try:
        app.run()
    finally:
        app.close_envs()
    return app.return_code or 0


def _first_unsubmitted(args, tasks: list):
    """The id of the first of ``tasks`` the watch session has not submitted (else the first)."""
    session = Session(getattr(args, "session", None) or "watch", root=getattr(args, "out", None))
    progress = session.progress(tasks)
    return next((t.id for t in tasks if progress.by_task[t.key].state in ("new", "in progress")), tasks[0].id)


def _built_policy_spec(policy_info: dict) -> str:
    """The --policy spelling of a policy already built, from its description."""
    spec = policy_info.get("kind", "llm")
    return f"replay:{policy_info.get('source', '')}" if spec == "replay" else spec


def _watch_agent(args, config, policy, policy_info: dict | None):
    """Who the watch screen lets work: watch's options over the last use and config.toml's
    ``[agent]`` (or the policy already built); TaskFileError in one line when it cannot run."""
    choice = agent_choice(config) if policy is None else AgentChoice()
    spec = getattr(args, "policy", None)
    if spec is None and policy is not None:
        spec = _built_policy_spec(policy_info or {})
    explicit = {"policy": spec, "model": getattr(args, "model", None), "base_url": getattr(args, "base_url", None),
                "strategy": getattr(args, "strategy", None), "protocol": getattr(args, "protocol", None),
                "mode": getattr(args, "mode", None), "actions": getattr(args, "actions", None)}
    try:
        return checked_choice({**choice.to_dict(), **{k: v for k, v in explicit.items() if v is not None}})
    except PolicyError as exc:
        raise TaskFileError("icplay watch", str(exc)) from None
