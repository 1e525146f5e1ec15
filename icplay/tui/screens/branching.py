"""Branching from the screens: the viewer's ``b`` (at the turn on screen) and watch's Alt+B
(after the end, at the highlighted or last turn) run what ``icplay branch`` runs
(``icplay.review.branch``) on a worker thread: each continuation played in a fresh sandbox and
scored, saved where ``icplay branch`` saves them (the viewer lists them, marked ⑂), one notice
per branch as it ends and one naming them all."""

from __future__ import annotations

from typing import Any

from icplay.episode import Trajectory
from icplay.frontend.branching import branch_line, branches_dir, sample_policy
from icplay.frontend.config import AgentChoice
from icplay.review.branch import Branching, branch
from icplay.tui.screens.modals import CommentScreen
from icplay.tui.shown import safe

N_PROMPT = "model continuations to sample (N, a whole number; 0 or empty: the recorded and corrected ones only)"


def ask_and_branch(screen, source: Trajectory, k: int, choice: AgentChoice | None) -> None:
    """Ask N, then branch ``source`` at turn index ``k`` (0-based); ``choice``: the agent whose
    model plays the N sampled continuations (an LLM agent only)."""

    def answered(words: str | None) -> None:
        if words is None:
            return
        n = int(words) if words.isdigit() else None
        if words and n is None:
            screen.notify(safe(f"N is a whole number, 0 or more, not {words!r}."), severity="warning", markup=False)
            return
        model = choice.model if choice is not None and choice.policy == "llm" else None
        if n and not model:
            screen.notify("Sampled continuations need a model: config.toml [agent] model (or watch with one).",
                          severity="warning", markup=False)
            return
        start_branching(screen, source, k, n or 0, choice if n else None)

    screen.app.push_screen(CommentScreen(f"Branch at turn {k + 1}: {N_PROMPT}", "0"), answered)


def _sampler(source: Trajectory, choice: AgentChoice | None) -> Any:
    if choice is None or not choice.model:
        return None
    return sample_policy(source, choice.model, choice.base_url, choice.model_options())


def start_branching(screen, source: Trajectory, k: int, n: int, choice: AgentChoice | None) -> None:
    """Branch on a Textual thread worker of the app (it outlives the screen): notices come
    through ``call_from_thread``, the episode browser reloads when it is done."""
    app = screen.app
    out, kind = branches_dir(app.home), source.env
    try:
        sampler = _sampler(source, choice)
    except ValueError as exc:
        screen.notify(safe(exc), title="Cannot branch", severity="error", markup=False)
        return

    def make_env():
        return app.env_factory(kind, app.sandbox_for(kind), app.image)

    def said(traj: Trajectory) -> None:
        app.call_from_thread(app.notify, safe(branch_line(traj)), title="Branch played", timeout=10, markup=False)

    how = Branching(make_env=make_env, out=out, sample_policy=sampler, on_branch=said)

    def work() -> None:
        try:
            branches = branch(source, k, n, how)
        except Exception as exc:     # a task not here, a sandbox that fails: said, never a traceback
            app.call_from_thread(app.notify, safe(f"{type(exc).__name__}: {exc}"), title="Cannot branch",
                                 severity="error", timeout=10, markup=False)
            return
        app.call_from_thread(_done, app, source, k, branches)

    app.run_worker(work, thread=True, group="branch", exit_on_error=False)
    screen.notify(f"Branching episode {source.id} at turn {k + 1}: each continuation in a fresh sandbox "
                  f"(+{n} sampled)…", timeout=6, markup=False)


def _done(app, source: Trajectory, k: int, branches: list[Trajectory]) -> None:
    lines = "\n".join(f"{(b.forked_from or {}).get('note', '')} — {branch_line(b)}" for b in branches)
    app.notify(safe(f"{len(branches)} branch(es) of {source.id} at turn {k + 1} saved in {branches_dir(app.home)}:\n"
                    f"{lines}"), title="Branched", timeout=20, markup=False)
    from icplay.tui.screens.view import ViewScreen   # here: an import cycle (the viewer's screens import this)

    for screen in app.screen_stack:
        if isinstance(screen, ViewScreen):
            screen.reload()
