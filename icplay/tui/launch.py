"""``run_app(args)``: what ``icplay play`` calls when ``--plain`` is not given.

``args`` carries ``env`` (bash | sql | None), ``tasks`` (a set name or a task file),
``task`` (an id), ``sandbox``, ``session`` (a baseline session name), ``image``, and
optionally ``out`` (the folder for the session's trajectories) and ``strict``.
Problems the user can fix (an unknown set or task id, a bad config file) are raised as
the CLI's user errors before the screen is taken over, so they print as one line.
"""

from __future__ import annotations

from icplay.tasks.model import TaskFileError


def run_app(args) -> int:
    from icplay.tui.app import Catalog, PlayApp
    from icplay.tui.config import ConfigError, load_config

    env = getattr(args, "env", None)
    tasks = getattr(args, "tasks", None)
    task_id = getattr(args, "task", None)
    try:
        config = load_config()
    except ConfigError as exc:
        raise TaskFileError(str(exc).split(":", 1)[0], str(exc).split(":", 1)[1].strip()) from None
    if getattr(args, "strict", False):
        config.strict = True
    catalog = Catalog(env, tasks)
    if task_id is not None:
        catalog.find(str(task_id), catalog.default_set(env, tasks))   # fail early, in one line
    app = PlayApp(env=env, tasks=tasks, task=None if task_id is None else str(task_id),
                  sandbox=getattr(args, "sandbox", None), session=getattr(args, "session", None),
                  image=getattr(args, "image", None), config=config, catalog=catalog,
                  out=getattr(args, "out", None))
    try:
        app.run()
    finally:
        app.close_envs()
    return app.return_code or 0


def run_watch(args) -> int:
    """What ``icplay watch`` calls without ``--plain``: the task on the watch screen.

    ``args`` carries what ``run_app`` takes plus ``policy`` (llm | gold | replay:FILE, or
    ``replay`` with ``replay`` = FILE), ``model``, ``base_url``, ``strategy``, ``protocol`` and
    ``mode``; options left out come from the last use, then config.toml's ``[agent]``.
    Without ``--task`` the picker opens and Ctrl+W lets the agent try a task.
    """
    from icplay.tui.app import Catalog, PlayApp
    from icplay.tui.config import AgentChoice, ConfigError, agent_choice, load_config
    from icplay.tui.policies import PolicyError, check_choice

    env = getattr(args, "env", None)
    tasks = getattr(args, "tasks", None)
    task_id = getattr(args, "task", None)
    try:
        config = load_config()
    except ConfigError as exc:
        raise TaskFileError(str(exc).split(":", 1)[0], str(exc).split(":", 1)[1].strip()) from None
    choice = agent_choice(config)
    policy = getattr(args, "policy", None)
    if policy == "replay" and getattr(args, "replay", None):
        policy = f"replay:{args.replay}"
    explicit = {"policy": policy, "model": getattr(args, "model", None), "base_url": getattr(args, "base_url", None),
                "strategy": getattr(args, "strategy", None), "protocol": getattr(args, "protocol", None),
                "mode": getattr(args, "mode", None)}
    values = {**choice.to_dict(), **{k: v for k, v in explicit.items() if v is not None}}
    if explicit["policy"] is not None and explicit["policy"] != "llm":
        values.pop("model", None)
    agent = AgentChoice(**values)
    try:
        check_choice(agent)
    except PolicyError as exc:
        raise TaskFileError("icplay watch", str(exc)) from None
    catalog = Catalog(env, tasks)
    if task_id is not None:
        catalog.find(str(task_id), catalog.default_set(env, tasks))   # fail early, in one line
    app = PlayApp(env=env, tasks=tasks, task=None if task_id is None else str(task_id),
                  sandbox=getattr(args, "sandbox", None), session=None, image=getattr(args, "image", None),
                  config=config, catalog=catalog, out=getattr(args, "out", None), watch=agent,
                  watch_session=getattr(args, "session", None))
    try:
        app.run()
    finally:
        app.close_envs()
    return app.return_code or 0
