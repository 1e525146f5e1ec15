"""``icplay serve-env --env LANG``: an OpenEnv server over icplay's environments.

Built on ``openenv-core``'s own server (``pip install 'icplay[openenv]'``): ``POST /reset``,
``POST /step``, ``GET /state``, ``GET /schema``, a WebSocket ``/ws`` session per client.
Actions are ``{"code": ...}`` (``submit`` submits); see icplay/serve/openenv.py and
docs/library.md.
"""

from __future__ import annotations

from icplay.languages import add_sandbox_argument
from icplay.process import UserError
from icplay.languages import UnknownLanguage
from icplay.sandbox.base import SandboxError


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("serve-env", help="serve a language's tasks as an OpenEnv environment (HTTP and WebSocket)",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("--env", required=True, help="the language: bash, sql, python, ctf or a plug-in's")
    add_sandbox_argument(p)
    p.add_argument("--tasks", help="the task set or file episodes reset to (default: the language's bundled set)")
    p.add_argument("--image", help="a task image to run (Bash, Python, CTF on Docker)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--max-envs", type=int, default=8, help="WebSocket sessions open at once (default 8)")
    p.add_argument("--max-active", type=int, help="env calls executing at once over all sessions "
                                                  "(default: a few per core for the sandbox)")
    p.add_argument("--protocol", choices=("agent", "intercode", "submit"), default="agent",
                   help="agent: the reward on submit (\"submit\" is its older name); intercode: a reward "
                        "after every action, the episode ending when solved")
    p.add_argument("--save-dir", help="save every episode's trajectory in this folder")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.max_envs < 1:
        raise UserError("--max-envs must be at least 1")
    try:
        import uvicorn

        from icplay.serve.openenv import make_app
    except ImportError as exc:
        raise UserError(f"serve-env needs openenv-core ({exc.name} is missing): pip install 'icplay[openenv]'") from None

    try:
        app = make_app(args.env, args.sandbox, max_envs=args.max_envs, tasks=args.tasks, image=args.image,
                       protocol=args.protocol, save_dir=args.save_dir, max_active=args.max_active)
    except (UnknownLanguage, SandboxError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(f"icplay serve-env: {args.env} on {app.state.icplay_family.factory.sandbox}, "
          f"http://{args.host}:{args.port} (ws /ws, up to {args.max_envs} sessions)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
