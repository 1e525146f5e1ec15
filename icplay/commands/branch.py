"""``icplay branch FILE --turn K [--n N --model M]``: play an episode on from the state before
turn K, several ways, each in a fresh sandbox, each scored.

The continuations: the recorded one (called ``correction`` when turn K is a human's edit or
rejection), the agent's edited or rejected proposal instead (then the recorded turns after
it), and N continuations a model plays (``--model``, sampled at ``--temperature``). Each is
saved as an episode naming its parent and turn (``forked_from``: id, turn, branch) under
``--out`` (default ``$ICPLAY_HOME/trajectories/branches``, which ``icplay view`` lists by
default, each marked ⑂ and grouped with its parent), and printed with its reward and strict verdict. ``icplay export
preference`` pairs them by outcome (docs/export.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

from icplay.languages import add_sandbox_argument
from icplay.process import UserError

# What a command needs is imported inside the function that runs it (said here once for the
# module): `icplay --help` imports every command module and must start fast.


def register(sub) -> None:
    p = sub.add_parser("branch", help="play an episode on from a turn several ways (recorded, correction, proposal, "
                       "model samples), each scored", description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("file", metavar="FILE", help="a saved episode (trajectory file)")
    p.add_argument("--turn", type=int, required=True, metavar="K", help="branch at turn K (1 is the first turn)")
    p.add_argument("--n", type=int, default=0, metavar="N", help="model continuations to sample (needs --model)")
    p.add_argument("--model", help="the model that plays the sampled continuations")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint of --model ($OPENAI_BASE_URL)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of --model (default 1.0)")
    p.add_argument("--max-turns", type=int, default=10, help="turns a sampled continuation may take (default 10)")
    p.add_argument("--out", type=Path, default=None, help="folder the branches are saved in "
                   "(default: $ICPLAY_HOME/trajectories/branches, which icplay view lists)")
    add_sandbox_argument(p, " (each branch gets a fresh one)")
    p.add_argument("--image", help="Docker image for Bash episodes")
    p.set_defaults(func=run)


def run(args) -> int:
    from icplay.driver import Limits
    from icplay.frontend.branching import branches_dir
    from icplay.paths import home_dir
    from icplay.review.branch import BranchError, Branching, branch

    source = _source(args)
    out = args.out or branches_dir(home_dir())
    how = Branching(make_env=_env_maker(source, args), out=out, sample_policy=_sampler(source, args),
                    limits=Limits(max_turns=args.max_turns), on_branch=_say)
    print(f"icplay: branching episode {source.id} ({source.task_key}) at turn {args.turn} of {len(source.turns)}",
          file=sys.stderr)
    try:
        branches = branch(source, args.turn - 1, args.n, how)
    except BranchError as exc:
        raise UserError(str(exc)) from None
    print(f"icplay: {len(branches)} branch(es) saved in {out}", file=sys.stderr)
    return 0


def _source(args):
    from icplay.store import load_trajectory

    if args.n < 0 or args.max_turns < 1:
        raise UserError("--n is 0 or more and --max-turns 1 or more")
    if args.n and not args.model:
        raise UserError("sampled continuations (--n) need a model: --model NAME")
    source = load_trajectory(args.file)      # TrajectoryFileError: one sentence naming file and field
    if not 1 <= args.turn <= len(source.turns):
        raise UserError(f"{args.file}: --turn {args.turn} is not a turn of this episode (1 to {len(source.turns)})")
    return source


def _env_maker(source, args):
    from icplay.languages import make_env, names

    if source.env not in names():
        raise UserError(f"{args.file}: no environment {source.env!r} here to branch it on ({', '.join(names())})")

    def make():
        return make_env(source.env, sandbox=args.sandbox, image=args.image,
                        progress=lambda line: print(line, file=sys.stderr))

    return make


def _sampler(source, args):
    """A factory of the model policy that plays sampled continuations (None without --model)."""
    if not args.model:
        return None
    from icplay.frontend.branching import sample_policy

    try:
        return sample_policy(source, args.model, args.base_url, {"temperature": args.temperature})
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _say(traj) -> None:
    from icplay.frontend.branching import branch_line

    print(f"  {branch_line(traj)}")
