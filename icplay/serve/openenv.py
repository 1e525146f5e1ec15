"""An OpenEnv server over any icplay language and sandbox: OpenEnv's protocol (openenv-core's
types, serialization and WebSocket messages, so its own clients work), served by icplay's own
routes so that every door is checked.

    app = make_app("sql", sandbox="sqlite", max_envs=8)       # uvicorn.run(app)

    from openenv.core.generic_client import GenericEnvClient
    with GenericEnvClient(base_url="http://localhost:8000").sync() as env:
        first = env.reset(task="bookshop-01")                  # observation["query"]
        env.step({"code": "SELECT title FROM books"})
        done = env.step({"code": "submit"})                    # done.reward, observation["solved"]

Each WebSocket session is one ``IcplayEnvironment``: one episode at a time, its own
sandbox. OpenEnv's HTTP ``/reset`` and ``/step`` make a new environment per request and
close it after, so an HTTP episode is one request: ``/step`` with ``task`` and the
actions (``{"task": "bookshop-01", "code": GOLD, "then": ["submit"]}``).

What the server trusts of a client (docs/security.md, "serve-env"): nothing. Clients name
tasks of the server's own set (never a file); ``Guard`` refuses foreign Host and Origin
headers, a missing token and big bodies; every session (HTTP request or WebSocket) takes a
place of ``--max-envs``; a WebSocket silent for ``idle_timeout`` seconds is closed; a session
is closed by its own connection only (OpenEnv's MCP endpoints, which let any client close any
session by its id, are not served: icplay's environments have no MCP tools). Observations
carry the reward, never how it was computed (the breakdown is saved with the trajectory).

The sessions of one server share icplay's warm sandbox pools, gold runs and admission
(``icplay.languages.EnvFactory``): at most a few env calls per core execute at once
however many sessions are open (icplay/envs/admission.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Optional

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ConfigDict, Field, ValidationError

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import (Action, EnvironmentMetadata, HealthResponse, Observation, ResetRequest,
                                           SchemaResponse, State, StepRequest, WSErrorCode, WSErrorResponse)

from icplay.envs.base import observation_parts
from icplay.json_shape import DuplicateKeyError, loads
from icplay.languages import EnvFactory, get
from icplay.library import CallerLoop, find_task, load_task_list
from icplay.sandbox.base import SandboxError
from icplay.serve.guard import DoorPolicy, Guard
from icplay.serve.sessions import AtCapacity, Places
from icplay.tasks.model import Task

MAX_THEN = 64                      # actions one step may chain after ``code``
DEFAULT_IDLE_TIMEOUT = 600.0       # seconds a WebSocket may stay silent before it is closed

class StrictReset(ResetRequest):
    """OpenEnv's reset body, read strictly: ``"seed": true`` or ``"seed": "7"`` is refused (422),
    where pydantic's lax reading took them for seeds 1 and 7."""

    model_config = ConfigDict(strict=True)

RESET_ARGUMENTS = ("task", "seed", "episode_id")


class ClientMistake(ValueError):
    """A request icplay refuses: one sentence for the client, a 4xx status."""

    def __init__(self, sentence: str, status: int = 400):
        super().__init__(sentence)
        self.status = status


class CodeAction(Action):
    """One action in the task's language; ``submit`` (``submit ARG``) ends the episode."""

    code: str = Field(..., description="a command, query or snippet in the env's language; "
                                       "'submit' (Python: 'submit NAME', CTF: 'submit FLAG') scores the episode")
    task: Optional[str] = Field(default=None, description="reset to this task of the server's set first (an "
                                                          "HTTP episode is one request: /step makes a new env)")
    then: list[str] = Field(default_factory=list, max_length=MAX_THEN,
                            description="more actions run after code in this step, e.g. ['submit']; the "
                                        "observation is the last one's")


class CodeObservation(Observation):
    """What the action printed and, at the end, whether the episode solved its task."""

    output: str = Field(default="", description="what the action printed (the task's query after reset)")
    exit_code: Optional[int] = Field(default=None, description="the action's exit code, where the language has one")
    notes: list[str] = Field(default_factory=list, description="icplay's notes on the action (cut, timed out, ...)")
    task: Optional[str] = Field(default=None, description="the task's key (set/id)")
    query: str = Field(default="", description="the task's query")
    solved: Optional[bool] = Field(default=None, description="at the end: the reward is 1.0 (how it was computed "
                                                             "is saved with the trajectory, never sent)")
    strictly_solved: Optional[bool] = Field(default=None, description="at the end: icplay's strict verdict")


class EpisodeState(State):
    """The episode: its task, language, sandbox and status."""

    task: Optional[str] = None
    env: str = ""
    sandbox: str = ""
    status: str = "idle"
    reward: Optional[float] = None


class Family:
    """What the sessions of one server share: the env factory (pools, gold runs, admission),
    the task set and the places of ``--max-envs``."""

    def __init__(self, env_name: str, sandbox: str | None = None, *, tasks: str | Path | None = None,
                 image: str | None = None, protocol: str = "agent", save_dir: str | Path | None = None,
                 max_active: int | None = None, max_envs: int = 8):
        get(env_name)   # UnknownLanguage names the known ones
        self.env_name, self.protocol, self.save_dir = env_name, protocol, save_dir
        self.places = Places(max_envs)
        self.tasks = load_task_list(tasks if tasks is not None else env_name, env_name)
        self.factory = EnvFactory(env_name, sandbox, image=image, max_active=max_active)
        self._lock = threading.Lock()
        self._next = 0

    def pick(self, seed: int | None) -> Task:
        """A task of the set: drawn with ``seed``, else the next in turn."""
        if seed is not None:
            return random.Random(seed).choice(self.tasks)
        with self._lock:
            task = self.tasks[self._next % len(self.tasks)]
            self._next += 1
        return task

    def find(self, task_id: str) -> Task:
        try:
            return find_task(self.tasks, task_id)
        except ValueError as exc:
            raise ClientMistake(str(exc), 404) from None

    def close(self) -> None:
        self.factory.close()


class IcplayEnvironment(Environment):
    """One OpenEnv session: icplay episodes over ``CallerLoop``, one at a time."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, family: Family):
        super().__init__()
        self.family = family
        self.loop = CallerLoop(family.env_name, family.factory.sandbox, protocol=family.protocol,
                               save_dir=family.save_dir, env_factory=family.factory)
        self._state = EpisodeState(env=family.env_name, sandbox=family.factory.sandbox)
        self._task: Task | None = None

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, task: Optional[str] = None,
              **kwargs: Any) -> CodeObservation:
        """A pristine sandbox for ``task`` (an id of the server's set; drawn with ``seed``, else
        the next one in turn)."""
        if kwargs:
            raise ClientMistake(f"unknown reset argument(s) {', '.join(sorted(kwargs))} (known: "
                                f"{', '.join(RESET_ARGUMENTS)}; a client names a task of this server's set, "
                                "never a file)")
        chosen = self.family.find(task) if task is not None else self.family.pick(seed)
        self.loop.stop()
        query = self.loop.reset(chosen, policy={"kind": "openenv"})
        self._task = chosen
        self._state = EpisodeState(episode_id=episode_id or str(uuid.uuid4()), step_count=0, task=chosen.key,
                                   env=self.family.env_name, sandbox=self.family.factory.sandbox, status="running")
        return CodeObservation(output=query, query=query, task=chosen.key, done=False, reward=None)

    def step(self, action: CodeAction, timeout_s: Optional[float] = None, **kwargs: Any) -> CodeObservation:
        if action.task is not None and (self._task is None or action.task not in (self._task.id, self._task.key)
                                        or self.loop.done):
            self.reset(task=action.task)
        if self._task is None:
            raise ClientMistake("no episode: reset first (over HTTP, send 'task' with the action: each request "
                                "is a new environment)")
        observations: list[CodeObservation] = []
        for code in [action.code, *action.then]:
            if self.loop.done:
                raise ClientMistake("the episode has ended: reset for the next one", 409)
            observations.append(self._one(code))
        return observations[-1]

    def _one(self, code: str) -> CodeObservation:
        task = self._task
        assert task is not None, "step() reset the episode first"
        outcome = self.loop.step(code)
        self._state.step_count += 1
        info = outcome.info
        text, notes = observation_parts(outcome.observation, info)
        if outcome.terminated:
            self._state.status = "submitted"
            self._state.reward = outcome.reward
        return CodeObservation(output=text, exit_code=info.get("exit_code"), notes=notes, task=task.key,
                               query=task.query, done=outcome.terminated, reward=outcome.reward,
                               solved=info.get("solved"), strictly_solved=info.get("strictly_solved"))

    @property
    def state(self) -> EpisodeState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return metadata_of(self.family)

    def close(self) -> None:
        self.loop.close()


def metadata_of(family: Family) -> EnvironmentMetadata:
    spec = get(family.env_name)
    return EnvironmentMetadata(name=f"icplay-{spec.name}", version="0.1.0",
                               description=f"icplay {spec.title} on {family.factory.sandbox}: {spec.description}")


def refusal_of(exc: BaseException) -> tuple[int, str, str]:
    """(HTTP status, OpenEnv error code, sentence) of what went wrong in a request."""
    if isinstance(exc, ClientMistake):
        return exc.status, WSErrorCode.EXECUTION_ERROR.value, str(exc)
    if isinstance(exc, ValidationError):
        return 422, WSErrorCode.VALIDATION_ERROR.value, validation_sentence(exc.errors())
    if isinstance(exc, AtCapacity):
        return 503, WSErrorCode.CAPACITY_REACHED.value, str(exc)
    if isinstance(exc, SandboxError):
        return 503, WSErrorCode.EXECUTION_ERROR.value, f"the sandbox failed: {exc}"
    return 500, WSErrorCode.EXECUTION_ERROR.value, f"icplay failed on this request: {type(exc).__name__}: {exc}"


def validation_sentence(errors: Any) -> str:
    """Pydantic's first complaint as one sentence naming the field."""
    first = (list(errors) or [{}])[0]
    if first.get("type") == "json_invalid":
        return f"the request body is not JSON ({first.get('ctx', {}).get('error', 'invalid')})"
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    return f"the request's field {where or '(body)'} is not valid: {first.get('msg', 'invalid')}"


class Server:
    """The routes: OpenEnv's /reset, /step, /state, /schema, /metadata, /health and /ws."""

    def __init__(self, family: Family, idle_timeout: float):
        self.family, self.idle_timeout = family, idle_timeout
        self.executor = ThreadPoolExecutor(max_workers=family.places.limit, thread_name_prefix="icplay-serve")

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(fn, *args))

    async def one_request(self, body: Callable[[IcplayEnvironment], Any]) -> JSONResponse:
        """An HTTP episode: a place, a new environment, ``body`` on it, closed after."""
        try:
            self.family.places.take()
        except AtCapacity as exc:
            return error_response(exc)
        env = IcplayEnvironment(self.family)
        try:
            observation = await self.run(body, env)
            return JSONResponse(serialize_observation(observation))
        except Exception as exc:   # the server's answer to any failure: its status and sentence (500 for a bug)
            return error_response(exc)
        finally:
            await self.run(env.close)
            self.family.places.give_back()

    async def reset(self, request: StrictReset) -> JSONResponse:
        return await self.one_request(lambda env: env.reset(**request.model_dump(exclude_unset=True)))

    async def step(self, request: StepRequest) -> JSONResponse:
        try:
            action = CodeAction.model_validate(request.action)
        except ValidationError as exc:
            return error_response(exc)
        return await self.one_request(lambda env: env.step(action))

    async def websocket(self, socket: WebSocket) -> None:
        """One session for the connection's life: its own environment and place; closed by its
        own close message, its disconnect, or ``idle_timeout`` seconds of silence."""
        await socket.accept()
        try:
            self.family.places.take()
        except AtCapacity as exc:
            await socket.send_text(WSErrorResponse(data={"message": str(exc), "code": WSErrorCode.CAPACITY_REACHED,
                                                         "active_sessions": exc.held,
                                                         "max_sessions": exc.limit}).model_dump_json())
            await socket.close(code=1013)
            return
        env = IcplayEnvironment(self.family)
        expired = False
        try:
            expired = await self._session(socket, env)
        finally:
            await self.run(env.close)
            self.family.places.give_back()
        if expired:    # closed after its place is free: a client that reconnects at once finds it
            await socket.close(code=1001)

    async def _session(self, socket: WebSocket, env: IcplayEnvironment) -> bool:
        """Answer the socket's messages until it closes (False) or stays silent too long (True)."""
        while True:
            try:
                raw = await asyncio.wait_for(socket.receive_text(), self.idle_timeout)
            except (TimeoutError, asyncio.TimeoutError):
                await send_ws_error(socket, f"the session was closed after {self.idle_timeout:g} s without a "
                                            "message; connect again", "SESSION_EXPIRED")
                return True
            except (WebSocketDisconnect, RuntimeError):
                return False
            try:
                message = loads(raw)     # a key stated twice is refused, as in HTTP bodies
                if not isinstance(message, dict):
                    raise ClientMistake("a message is a JSON object with a 'type'")
            except ClientMistake as exc:
                await send_ws_error(socket, str(exc), WSErrorCode.INVALID_JSON.value)
                continue
            except DuplicateKeyError as exc:
                await send_ws_error(socket, f"the message states {exc.field} twice, so it is refused",
                                    WSErrorCode.INVALID_JSON.value)
                continue
            except (ValueError, RecursionError) as exc:   # JSONDecodeError, a 5000-digit number, 100k brackets
                await send_ws_error(socket, f"the message is not JSON icplay reads: {exc}",
                                    WSErrorCode.INVALID_JSON.value)
                continue
            if message.get("type") == "close":
                return False
            await socket.send_text(json.dumps(await self._answer(env, message)))

    async def _answer(self, env: IcplayEnvironment, message: dict[str, Any]) -> dict[str, Any]:
        kind, data = message.get("type"), message.get("data") or {}
        try:
            if not isinstance(data, dict):
                raise ClientMistake("a message's 'data' is a JSON object")
            if kind == "reset":    # checked as HTTP's /reset body is: a seed is a number >= 0, never a list
                arguments = StrictReset.model_validate(data).model_dump(exclude_unset=True)
                return {"type": "observation",
                        "data": serialize_observation(await self.run(lambda: env.reset(**arguments)))}
            if kind == "step":
                action = CodeAction.model_validate(data)
                return {"type": "observation", "data": serialize_observation(await self.run(env.step, action))}
            if kind == "state":
                return {"type": "state", "data": env.state.model_dump()}
        except Exception as exc:   # the socket's answer to any failure, as HTTP's: a code and a sentence
            _, code, sentence = refusal_of(exc)
            return {"type": "error", "data": {"message": sentence, "code": code}}
        return {"type": "error", "data": {"message": f"unknown message type {kind!r} (known: reset, step, state, "
                                                     "close)", "code": WSErrorCode.UNKNOWN_TYPE.value}}


async def send_ws_error(socket: WebSocket, sentence: str, code: str) -> None:
    try:
        await socket.send_text(json.dumps({"type": "error", "data": {"message": sentence, "code": code}}))
    except (WebSocketDisconnect, RuntimeError):
        pass


def error_response(exc: BaseException) -> JSONResponse:
    status, _, sentence = refusal_of(exc)
    headers = {"Retry-After": "5"} if status == 503 else None
    return JSONResponse({"detail": sentence}, status_code=status, headers=headers)


def _routes(app: FastAPI, server: Server) -> None:
    family = server.family
    app.post("/reset")(server.reset)
    app.post("/step")(server.step)
    app.websocket("/ws")(server.websocket)
    app.get("/state")(lambda: EpisodeState(env=family.env_name, sandbox=family.factory.sandbox))
    app.get("/metadata")(lambda: metadata_of(family))
    app.get("/health")(lambda: HealthResponse())
    app.get("/schema")(lambda: SchemaResponse(action=CodeAction.model_json_schema(),
                                              observation=CodeObservation.model_json_schema(),
                                              state=EpisodeState.model_json_schema()))

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        return JSONResponse({"detail": validation_sentence(errors)}, status_code=422)

    async def failed(request: Request, exc: Exception) -> JSONResponse:
        return error_response(exc)

    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(Exception, failed)


def make_app(env_name: str, sandbox: str | None = None, *, max_envs: int = 8, tasks: str | Path | None = None,
             image: str | None = None, protocol: str = "agent", save_dir: str | Path | None = None,
             max_active: int | None = None, host: str = "127.0.0.1", token: str | None = None,
             allowed_hosts: tuple[str, ...] = (), max_body: int | None = None,
             idle_timeout: float = DEFAULT_IDLE_TIMEOUT):
    """The server over ``env_name`` on ``sandbox`` behind its guard: ``max_envs`` environments at
    once over HTTP and WebSocket together; ``host`` the address it will listen on (beyond
    loopback it needs ``token``). The shared pools close when the app shuts down."""
    if idle_timeout <= 0:
        raise ValueError("the idle timeout must be above 0 seconds")
    policy = DoorPolicy(bound=host, token=token, allowed_hosts=tuple(allowed_hosts),
                        **({"max_body": max_body} if max_body is not None else {}))
    family = Family(env_name, sandbox, tasks=tasks, image=image, protocol=protocol, save_dir=save_dir,
                    max_active=max_active, max_envs=max_envs)
    server = Server(family, idle_timeout)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            family.close()
            server.executor.shutdown(wait=False)

    app = FastAPI(title=f"icplay-{env_name}", description="OpenEnv's protocol over icplay's environments",
                  lifespan=lifespan)
    _routes(app, server)
    app.state.icplay_family = family
    return Guard(app, policy)
