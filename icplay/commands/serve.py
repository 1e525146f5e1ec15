"""``icplay serve``: a study's seats in the browser (textual-serve behind a token gate).

``icplay serve tokens --study NAME`` makes a token for each annotator of the study (and
``--supervisor NAME`` for a read-only seat), prints each once as a link, and keeps only
its SHA-256 beside the study. ``icplay serve --study NAME --port P`` then serves the
playground itself: each link opens its annotator's own app process on their own queue;
anything without a valid token gets 401. Bound to 127.0.0.1 unless --host says otherwise;
docs/studies.md ("A seat in the browser") puts it behind TLS.
"""

from __future__ import annotations

import ipaddress
import sys

from icplay.process import UserError


# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("serve", help="serve a study's seats to browsers (textual-serve, one token per annotator)",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    _common(p, required=False)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.set_defaults(func=run)
    actions = p.add_subparsers(dest="serve_action", metavar="ACTION")
    tokens = actions.add_parser("tokens", help="make the seats' tokens (shown once, stored hashed)")
    _common(tokens)
    tokens.add_argument("--annotator", action="append", default=[], metavar="NAME",
                        help="make a token for this annotator only (repeatable; default: every annotator of the study)")
    tokens.add_argument("--supervisor", action="append", default=[], metavar="NAME",
                        help="make a read-only supervisor's token for NAME (repeatable)")
    tokens.set_defaults(func=run_tokens)


def _common(p, required: bool = True) -> None:
    p.add_argument("--study", required=required, help="the study whose seats these are")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--public-url", help="the address browsers use when it is not http://HOST:PORT "
                                        "(behind a TLS proxy: https://...)")


def public_url(args) -> str:
    if args.public_url:
        return args.public_url.rstrip("/")
    host = getattr(args, "host", "127.0.0.1")
    return f"http://{'[' + host + ']' if ':' in host else host}:{args.port}"


def study_seats(study: str):
    """The study's seats file (its folder must exist: ``icplay study new`` makes it)."""
    from icplay.seat.study import seats_of

    try:
        return seats_of(study)
    except (ValueError, OSError) as exc:
        raise UserError(str(exc)) from None


def run_tokens(args) -> int:
    from icplay.seat.study import annotators_of
    from icplay.study.seats import ANNOTATOR, SUPERVISOR

    seats = study_seats(args.study)
    wanted = [(name, ANNOTATOR) for name in (args.annotator or annotators_of(args.study))]
    wanted += [(name, SUPERVISOR) for name in args.supervisor]
    if not wanted:
        raise UserError(f"study {args.study}: no annotators to make tokens for (name them with --annotator)")
    base = public_url(args)
    print(f"Tokens for study {args.study}: each link is shown this once (only a hash is kept, in {seats.path});\n"
          "making a seat's token again revokes its old one.")
    for name, role in wanted:
        token = seats.issue(name, role)
        print(f"  {name} ({role})  {base}/?token={token}")
    return 0


def extra_install(extra: str) -> str:
    """The command that installs an extra's packages into this environment, whatever installed
    icplay (a local wheel or a checkout: ``pip install 'icplay[serve]'`` asks a package index
    for icplay itself, and fails where icplay is not on one)."""
    import importlib.metadata
    import shlex

    marker = f'extra == "{extra}"'
    try:
        wanted = [r.split(";")[0].strip() for r in importlib.metadata.requires("icplay") or [] if marker in r]
    except importlib.metadata.PackageNotFoundError:
        wanted = []
    packages = " ".join(shlex.quote(r) for r in wanted) or f"'icplay[{extra}]'"
    return f"{shlex.quote(sys.executable)} -m pip install {packages}"


def run(args) -> int:
    if not args.study:
        raise UserError("icplay serve: name the study: --study NAME")
    try:
        from icplay.seat.server import SeatServer, serve
    except ImportError as exc:
        raise UserError(f"icplay serve needs its 'serve' extra ({exc.name} is missing): {extra_install('serve')}") \
            from None
    from icplay.seat.study import episodes_of, seat_commands

    seats = study_seats(args.study)
    if not seats.seats:
        raise UserError(f"study {args.study} has no seats yet: make their tokens with "
                        f"`icplay serve tokens --study {args.study}`")
    url = public_url(args)
    if not _loopback(args.host) and not url.startswith("https:"):
        print(f"icplay serve: warning: listening on {args.host} without TLS: tokens cross the network in the clear; "
              "put a TLS proxy in front (docs/studies.md) and pass --public-url https://...", file=sys.stderr)
    server = SeatServer(seats, seat_commands(args.study), url, episodes=lambda: episodes_of(args.study),
                        title=f"icplay · {args.study}")
    names = ", ".join(f"{s.name} ({s.role})" for s in seats.seats)
    print(f"icplay serve: study {args.study} at {url} (seats: {names}); Ctrl+C stops", flush=True)
    serve(server, args.host, args.port, say=lambda line: None)
    return 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

