"""``icplay serve-env --env LANG``: an OpenEnv server over icplay's environments.

OpenEnv's protocol (pip install 'icplay[openenv]'): POST /reset, POST /step,
GET /state, GET /schema, a WebSocket /ws session per client. Actions are
{"code": ...} ("submit" submits); clients name tasks of --tasks, never files. It
answers only to its own names (a loopback name, --host, --allow-host) and never to another
site's web page; beyond loopback it needs --token (clients send 'Authorization: Bearer
TOKEN'). Observations carry the reward, never how it was computed (--save-dir keeps that). See
docs/library.md and docs/security.md.
"""

from __future__ import annotations

import os

from icplay.languages import add_sandbox_argument
from icplay.process import UserError
from icplay.languages import UnknownLanguage
from icplay.sandbox.base import SandboxError


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.

TOKEN_VARIABLE = "ICPLAY_SERVE_TOKEN"


def register(sub) -> None:
    p = sub.add_parser("serve-env", help="serve a language's tasks as an OpenEnv environment (HTTP and WebSocket)",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("--env", required=True, help="the language: bash, sql, python, ctf or a plug-in's")
    add_sandbox_argument(p)
    p.add_argument("--tasks", help="the task set or file clients' episodes come from (default: the language's "
                                   "bundled set); clients name a task of it by id")
    p.add_argument("--image", help="a task image to run (Bash, Python, CTF on Docker)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1); an address "
                                                       "beyond loopback needs --token")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--token", default=os.environ.get(TOKEN_VARIABLE),
                   help=f"clients must send 'Authorization: Bearer TOKEN' (default ${TOKEN_VARIABLE}; "
                        "required when --host is not a loopback address)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a further name clients reach the server by (the Host header they send), e.g. behind a "
                        "proxy; repeatable. Loopback names and --host are always allowed")
    p.add_argument("--max-envs", type=int, default=8, help="environments at once, HTTP requests and WebSocket "
                                                           "sessions together (default 8); more are refused")
    p.add_argument("--idle-timeout", type=float, default=600.0,
                   help="seconds a WebSocket session may stay silent before it is closed (default 600)")
    p.add_argument("--max-body", type=int, default=1 << 20,
                   help="bytes of a request body or WebSocket message (default 1048576); more is refused (413)")
    p.add_argument("--max-active", type=int, help="env calls executing at once over all sessions "
                                                  "(default: a few per core for the sandbox)")
    p.add_argument("--protocol", choices=("agent", "intercode", "submit"), default="agent",
                   help="agent: the reward on submit (\"submit\" is its older name); intercode: a reward "
                        "after every action, the episode ending when solved")
    p.add_argument("--save-dir", help="save every episode's trajectory (with the reward's breakdown) in this folder")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.max_envs < 1:
        raise UserError("--max-envs must be at least 1")
    try:
        import uvicorn

        from icplay.serve.http import uvicorn_options
        from icplay.serve.openenv import make_app
    except ImportError as exc:
        raise UserError(f"serve-env needs openenv-core ({exc.name} is missing): pip install 'icplay[openenv]'") from None

    try:
        app = make_app(args.env, args.sandbox, max_envs=args.max_envs, tasks=args.tasks, image=args.image,
                       protocol=args.protocol, save_dir=args.save_dir, max_active=args.max_active,
                       host=args.host, token=args.token, allowed_hosts=tuple(args.allow_host),
                       max_body=args.max_body, idle_timeout=args.idle_timeout)
    except (UnknownLanguage, SandboxError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(f"icplay serve-env: {args.env} on {app.state.icplay_family.factory.sandbox}, "
          f"http://{args.host}:{args.port} (ws /ws, up to {args.max_envs} environments"
          f"{', token required' if args.token else ''})", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", **uvicorn_options(args.max_body))
    return 0
