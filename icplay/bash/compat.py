"""``--compat intercode`` for Bash: InterCode's observable execution semantics.

icplay's default Bash env runs actions in one persistent shell and scores against a gold
run made once per task. InterCode's ``BashEnv`` (intercode/envs/bash/bash_env.py) does
otherwise, and its published rewards carry the marks of it. This env reproduces them:

- every action is its own ``docker exec`` of the *string* ``/bin/bash -c "ACTION"``,
  which docker-py splits with ``shlex.split``: inner double quotes end the ``-c``
  argument, backslashes are eaten, ``$1`` and ``$(...)`` reach bash unquoted (so they
  work, but inside what shlex left). An action shlex cannot split observes
  ``Malformed command``; a non-UTF-8 output too;
- the working directory is emulated: an action starting with ``cd`` runs as
  ``cd <path simplified by InterCode's rules>`` at ``/`` and, if it succeeds, becomes the
  workdir of the next execs; nothing else (``export``, functions) persists;
- an action that runs longer than 10 s observes ``Command timed out`` and is left
  running, as InterCode's alarm leaves it;
- reset runs ``git reset --hard; git clean -fd;`` at the image's working directory
  (``/`` on the NL2Bash images), which deletes the image's empty directories and untracked
  files outside .gitignore (``/tmp``, ``/mnt``): ``find -empty`` tasks depend on it;
- the gold runs at submit time, in a second container reset the same way, at ``/``;
- p1 parses ``git status --short`` by InterCode's whitespace split; p2 hashes each common
  added path with ``md5sum PATH`` (a '.' in it) or ``md5deep -r PATH`` run as plain
  execs, comparing their outputs: on an image without md5deep both fail alike and count
  as the same; p3 compares the last action's output with the gold's.

Containers are made as InterCode makes them (its image's command, a tty, Docker's default
network: this mode's actions reach what the host's network reaches) and carry nothing of
icplay's. By default each episode gets a new pair, removed at its end. With
``reuse_containers`` (``icplay rescore --compat intercode``) one pair serves every episode,
as InterCode's experiment scripts ran a file system's tasks in order in one agent and one
eval container reset only by git: whatever git does not restore carries over to the next
episode, as it did in the recordings — the times of files ``git reset --hard`` rewrote or
an action touched, git-ignored folders, ownership and modes, processes a timed-out
action left running.
"""

from __future__ import annotations

import codecs
import shlex
import threading
import time
from typing import Any, Callable

from icplay.envs.base import StepResult, SubmitResult, strict_verdict
from icplay.envs.bash_reward import BASE_REWARD, PART_WEIGHT, file_diff_score
from icplay.envs.tfidf import tfidf_cosine
from icplay.sandbox.base import DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, SandboxError
from icplay.tasks.model import Task
from icplay.sandbox import registry
from icplay.sandbox.container import EngineContainer, start_container
from icplay.sandbox.engine import engine_errors

GIT_RESET_SCRIPT = "git reset --hard; git clean -fd;"
GIT_STATUS_SCRIPT = "git status --short;"
ENTRYPOINT = "/bin/bash"
TIMED_OUT = "Command timed out"
MALFORMED = "Malformed command"
CONTENT_CHECKED = ("A", "??", "C")


# -- InterCode's helpers, as pure functions ------------------------------------------------


def clean_cmd(action: str, entrypoint: str = ENTRYPOINT) -> str:
    """InterCode's command string for an action: ``/bin/bash -c "ACTION"``."""
    return f'{entrypoint} -c "{action.strip()}"'


def exec_argv(command: str) -> list[str]:
    """What docker-py runs for a string command: ``shlex.split`` of it (raises ValueError
    on unbalanced quotes, as docker-py does)."""
    return shlex.split(command)


def simplify_path(current: str, changed: str) -> str:
    """InterCode's resolution of ``cd ARG`` against the emulated working directory."""
    if not changed:
        return current
    if changed[0] == "/":
        current = ""
    path: list[str] = []
    for segment in (current + "/" + changed).split("/"):
        if segment == "..":
            if path:
                path.pop()
        elif segment and segment != ".":
            path.append(segment)
    return "/" + "/".join(path)


def parse_status(status: str) -> list[tuple[str, str]]:
    """InterCode's parse of ``git status --short``: whitespace tokens paired as
    (status, path); an odd last token (InterCode raises there) is dropped."""
    tokens = status.split()
    return [(tokens[i], tokens[i + 1]) for i in range(0, len(tokens) - 1, 2)]


def capped_text(output: bytes, dropped: int) -> str:
    """An exec's output as InterCode decodes it (strict UTF-8: invalid bytes raise, and
    the action reads "Malformed command"); output cut at the cap may end inside a
    character, which is then left out."""
    if not dropped:
        return output.decode("utf-8")
    return codecs.getincrementaldecoder("utf-8")().decode(output, final=False)


def hash_command(path: str) -> str:
    return f"md5sum {path}" if "." in path else f"md5deep -r {path}"


def intercode_reward(agent_changes, gold_changes, same_hash: Callable[[str], bool], agent_obs, gold_obs) -> dict:
    """InterCode's ``get_reward`` from the facts; ``same_hash(path)`` compares one path's
    hash outputs in the two containers."""
    agent_set, gold_set = set(agent_changes), set(gold_changes)
    missing, extra = sorted(gold_set - agent_set), sorted(agent_set - gold_set)
    reward = BASE_REWARD
    p1 = file_diff_score(len(missing) + len(extra))
    reward += p1
    common = sorted(change for change in agent_set & gold_set if change[0] in CONTENT_CHECKED)
    same = [path for _status, path in common if same_hash(path)]
    p2 = PART_WEIGHT if not common else round(PART_WEIGHT * (len(same) / len(common)), 2)
    reward += p2
    cosine = None
    if agent_obs is not None and gold_obs is not None:
        cosine = tfidf_cosine(agent_obs, gold_obs)
    if cosine is None:
        cosine = 1.0 if agent_obs == gold_obs else 0.0
    p3 = round(PART_WEIGHT * cosine, 2)
    reward += p3
    return {"reward": reward, "p1": p1, "p2": p2, "p3": p3, "missing": [list(c) for c in missing],
            "extra": [list(c) for c in extra], "same_content": same,
            "different_content": [p for _s, p in common if p not in same], "cosine": cosine,
            "compat": "intercode"}


# -- containers ------------------------------------------------------------------------------


class IntercodeContainer:
    """A container as InterCode makes one (its image's command, a tty), actions as execs.

    InterCode's ``exec_run`` keeps every byte an action prints; here at most
    ``output_cap`` bytes of each exec are held (the rest is read, counted and dropped), so
    that an endless line cannot take icplay's memory (a recorded ``... | yes | tr -d '\\n'``
    took a rescore to 24 GB)."""

    def __init__(self, client: Any, image: str, output_cap: int = DEFAULT_OUTPUT_CAP, ulimits: list[Any] | None = None):
        # The engine's default network, as InterCode's containers had: a DNS lookup then gets
        # the host's resolver's answer (or its silence), as InterCode's env does today,
        # where no network at all printed "network unreachable" into the output scored
        self.container: EngineContainer = start_container(client, image, "bash", tty=True,
                                                          **({"ulimits": ulimits} if ulimits else {}))
        self.output_cap = output_cap
        self.dropped = 0      # bytes the last exec printed beyond the cap
        self._abandoned: list[threading.Event] = []

    def exec(self, command: str | list[str], workdir: str | None = None,
             timeout: float | None = None) -> tuple[int | None, bytes]:
        """docker-py's ``exec_run`` of a string (shlex-split) or argv, its output capped;
        None, b'' on timeout (the exec is then left running, its output no longer read)."""
        argv = exec_argv(command) if isinstance(command, str) else command
        abandon = threading.Event()
        done: dict[str, Any] = {}

        def work() -> None:
            try:
                done["result"] = self.container.exec(argv, self.output_cap, workdir=workdir, abandon=abandon)
            except BaseException as exc:   # handed to the caller, as exec_run raised it
                done["error"] = exc

        if timeout is None:
            work()
        else:
            reader = threading.Thread(target=work, daemon=True, name="icplay-ic-exec")
            reader.start()
            reader.join(timeout)
            if reader.is_alive():
                abandon.set()
                self._abandoned.append(abandon)
                return None, b""
        if "error" in done:
            raise done["error"]
        code, output, self.dropped = done["result"]
        return code, output

    def reset(self) -> None:
        code, output = self.exec(clean_cmd(GIT_RESET_SCRIPT))
        if code != 0:
            raise SandboxError(f"InterCode's reset (git reset --hard; git clean -fd) failed: "
                               f"{output.decode(errors='replace')[-300:]}")

    def close(self) -> None:
        for abandon in self._abandoned:
            abandon.set()
        self.container.remove()


class IntercodeBashEnv:
    """A Bash env with InterCode's semantics (see the module's docstring)."""

    name = "bash"
    compat = "intercode"

    def __init__(self, image: str | None = None, timeout: float | None = None, client: Any = None,
                 reuse_containers: bool = False, sandbox: str = "docker"):
        """``sandbox``: a kind of the sandbox registry that runs images (Docker, Podman)."""
        if not registry.capabilities(sandbox).runs_images:
            raise SandboxError(f"--compat intercode runs InterCode's containers, on "
                               f"{' or '.join(registry.image_kinds())}, not {sandbox!r}")
        self.sandbox_kind = sandbox
        self.image = image
        self.reuse_containers = reuse_containers
        self.timeout = timeout or DEFAULT_TIMEOUT
        self._client = client
        self.task: Task | None = None
        self.agent: IntercodeContainer | None = None
        self.eval: IntercodeContainer | None = None
        self.workdir = "/"
        self.last_output: str = ""
        self.cwd: str | None = None
        self._image: str | None = None   # the image of the pair held
        self._lock = threading.Lock()

    def _image_for(self, task: Task) -> str:
        image = self.image or task.image
        if not image:
            raise SandboxError("--compat intercode runs on an InterCode image: name one with --image "
                               "(icplay images build nl2bash builds them)")
        return image

    def _client_once(self) -> Any:
        if self._client is None:
            self._client = registry.image_engine(self.sandbox_kind).client()
        return self._client

    def _container(self, image: str) -> IntercodeContainer:
        return IntercodeContainer(self._client_once(), image,
                                  ulimits=registry.image_engine(self.sandbox_kind).rules.ulimits())

    def reset(self, task: Task) -> str:
        image = self._image_for(task)
        if not (self.reuse_containers and self._image == image):
            self._release()
        self.task = task
        if self.agent is None:
            self.agent = self._container(image)
            self._image = image
        self.agent.reset()
        self.workdir = self.cwd = "/"
        self.last_output = ""
        return task.query

    def step(self, action: str, on_output: Callable[[str], None] | None = None) -> StepResult:
        if self.agent is None:
            raise RuntimeError("reset() the environment before step()")
        started = time.monotonic()
        is_cd = action.startswith("cd")
        new_path = None
        info: dict[str, Any] = {"compat": "intercode"}
        try:
            if is_cd:
                cd_arg = action[action.index("cd ") + 3:].strip()
                new_path = simplify_path(self.workdir, cd_arg)
                action = f"cd {new_path}"
            code, output = self.agent.exec(clean_cmd(action), workdir="/" if is_cd else self.workdir,
                                           timeout=self.timeout)
            if code is None:
                observation, ok = TIMED_OUT, False
                info["timed_out"] = True
            else:
                observation, ok = capped_text(output, self.agent.dropped), code == 0
                if self.agent.dropped:
                    info["truncated_bytes"] = self.agent.dropped
        except engine_errors(ValueError):
            # InterCode's bare except: shlex, decoding, `cd` without an argument, an exec the engine refuses
            observation, ok, code = MALFORMED, False, None
        if is_cd and ok and new_path is not None:
            self.workdir = self.cwd = new_path
        info["cwd"] = self.workdir
        self.last_output = observation
        if on_output is not None and observation:
            on_output(observation)
        return StepResult(observation, code, time.monotonic() - started, info)

    def interrupt(self) -> None:
        """InterCode cannot stop an action; neither does this mode (it times out at 10 s)."""

    def submit(self, arg: str | None = None) -> SubmitResult:
        if self.agent is None or self.task is None:
            raise RuntimeError("reset() the environment before submit()")
        if self.eval is None:
            self.eval = self._container(self._image_for(self.task))
        self.eval.reset()
        gold_obs: str | None = None
        corrupt = False
        try:
            _code, output = self.eval.exec(clean_cmd(self.task.gold))
            gold_obs = capped_text(output, self.eval.dropped)
        except engine_errors(ValueError):
            corrupt = True   # a gold shlex cannot split or whose output is not UTF-8, as InterCode marks it
        agent_changes = parse_status(self.agent.exec(clean_cmd(GIT_STATUS_SCRIPT))[1].decode("utf-8", "replace"))
        gold_changes = parse_status(self.eval.exec(clean_cmd(GIT_STATUS_SCRIPT))[1].decode("utf-8", "replace"))

        agent, gold = self.agent, self.eval

        def same_hash(path: str) -> bool:
            command = hash_command(path)
            return self._hash(agent, command) == self._hash(gold, command)

        breakdown = intercode_reward(agent_changes, gold_changes, same_hash, self.last_output, gold_obs)
        breakdown["corrupt_gold"] = corrupt
        reasons: list[str] = []
        if breakdown["reward"] >= 1.0:
            # the strict verdict also compares what InterCode leaves out: modified (and
            # every other common) path's content, hashed as InterCode hashes
            reasons = [f"{path}: its content differs from the gold copy's"
                       for status, path in sorted(set(agent_changes) & set(gold_changes))
                       if status not in CONTENT_CHECKED and not same_hash(path)]
        return SubmitResult(breakdown["reward"], breakdown, gold_obs or "",
                            strict=strict_verdict(breakdown["reward"], reasons))

    @staticmethod
    def _hash(container: IntercodeContainer, command: str) -> bytes:
        try:
            return container.exec(command)[1]
        except engine_errors(ValueError) as exc:   # the engine refuses the exec (or shlex the path): alike on both sides
            return f"{type(exc).__name__}: {exc}".encode()

    def _release(self) -> None:
        for container in (self.agent, self.eval):
            if container is not None:
                container.close()
        self.agent = self.eval = None
        self._image = None

    def close(self) -> None:
        self._release()
