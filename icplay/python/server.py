"""icplay's Python interpreter server: runs INSIDE a sandbox, never in icplay's process.

Started by the client (``python3 -I -c PROGRAM SOCKET``: the program is this file after
``values.py``, passed on the command line, so no script of icplay's sits in the sandbox for
anyone to replace); it keeps one namespace and runs one request at a time. A request is a
header line ``TOKEN KIND`` and a body:

- ``run``: the body is code, run as one REPL input (an action of the episode);
- ``runs``: the body is a JSON list of inputs, run one after the other (a replay);
- ``probes``: the body is a JSON list of call expressions; after what each call printed
  comes ``@@ICPLAY-VALUE:`` and a JSON record (``values.py``): its index and its value,
  the exception it raised, or why it cannot be brought out.

While a request runs, file descriptors 1 and 2 are the connection, so print(), os.system()
and forked children reach the client. The end is ``\\0ICPLAY-END:TOKEN:STATUS\\n``. In a
scoring interpreter the solver's code runs in this very process and can rewrite all of it:
that only changes what this interpreter reports about the solver's own function, which is
all it could report anyway (docs/python.md, "Scoring out of reach").

``--judge`` runs the program once, without a server, as the judge (in the gold's sandbox
only): stdin is JSON with the gold, the set-up code and each test's call records and
check; ``__icplay_call__(k)`` gives the check the k-th call's result (what the call printed
is printed again, its exception raised again, its value rebuilt from data); after each
check comes ``@@ICPLAY-JUDGED:`` and its outcome as JSON. Standard library only;
python3 >= 3.8.
"""

import ast
import builtins
import json
import os
import socket
import sys
import tempfile
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # at run time this file follows values.py's text in one program (interpreter.py)
    from icplay.python.values import Opaque, decode_value, encode_value

NAMESPACE = {"__name__": "__main__", "__builtins__": __builtins__}
SERVER_PID = [os.getpid()]
VALUE_MARK = "@@ICPLAY-VALUE:"
JUDGED_MARK = "@@ICPLAY-JUDGED:"
MAX_MESSAGE = 4000


def error_line(exc):
    """The traceback's last line: ``NameError: name 'x' is not defined``."""
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type(exc).__name__


def flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # the solver may have put any object in sys.stdout; what it failed to say is lost
            pass


def run(code):
    """Run ``code`` as one REPL input; a bare last expression's value is shown. Returns ok/error."""
    try:
        tree = ast.parse(code, "<input>", "exec")
    except SyntaxError as exc:
        print(error_line(exc))
        return "error"
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Interactive(body=[tree.body.pop()])
    try:
        if tree.body:
            exec(compile(tree, "<input>", "exec"), NAMESPACE)
        if last is not None:
            exec(compile(last, "<input>", "single"), NAMESPACE)   # sys.displayhook prints a value
    except BaseException as exc:   # SystemExit and KeyboardInterrupt too: the interpreter goes on
        flush()
        print(error_line(exc))
        return "error"
    return "ok"


def exception_record(exc):
    """What the judge needs to raise ``exc`` again: its class's name, its builtin base, its text."""
    kind = type(exc)
    base = next((k.__name__ for k in kind.__mro__ if k.__module__ == "builtins"
                 and isinstance(getattr(builtins, k.__name__, None), type)), "Exception")
    try:
        message = str(exc)
    except BaseException:   # the solver's exception class runs its own __str__: the record goes without it
        message = ""
    return {"module": str(kind.__module__)[:200], "name": str(kind.__qualname__)[:200], "base": base,
            "message": message[:MAX_MESSAGE]}


def probe(code, k):
    """Evaluate call ``k`` and write its result record after what it printed."""
    status = "ok"
    try:
        value = eval(compile(code, "<call>", "eval"), NAMESPACE)
    except BaseException as exc:   # the solver's call, SystemExit too: what it raised is its result
        record, status = {"raised": exception_record(exc)}, "error"
    else:
        try:
            record = {"value": encode_value(value)}
        except Opaque as exc:
            record = {"opaque": str(exc)[:MAX_MESSAGE]}
        except BaseException as exc:   # a value whose own methods fail while it is read
            record = {"opaque": "reading the value raised %s" % type(exc).__name__}
    end_if_forked()     # a child of the call reports nothing: the call's result is its parent's
    record["k"] = k
    print(VALUE_MARK + json.dumps(record, ensure_ascii=True), flush=True)
    return status


def end_if_forked():
    """A fork in the code: the child's part ends with its code (not with the request)."""
    if os.getpid() != SERVER_PID[0]:
        flush()
        os._exit(0)


def probes(body):
    for k, code in enumerate(json.loads(body)):
        probe(code, k)
        end_if_forked()
    return "ok"


def runs(body):
    for code in json.loads(body):
        run(code)
        end_if_forked()
    return "ok"


class CallTable:
    """One test's call results, for the judge: ``__icplay_call__(k)`` is the k-th call."""

    def __init__(self, records):
        self.records = records

    def __call__(self, k):
        record = self.records[k]
        sys.stdout.write(record.get("out", ""))
        if "raised" in record:
            raise raised_again(record["raised"])
        return decode_value(record["value"])


def raised_again(record):
    """An exception that reads as the call's did: the same class name and module, the same text."""
    base = getattr(builtins, str(record.get("base")), None)
    if not (isinstance(base, type) and issubclass(base, BaseException)) or issubclass(base, SyntaxError):
        base = Exception
    message = str(record.get("message", ""))
    kind = type(str(record.get("name", "Exception")), (base,), {
        "__module__": str(record.get("module", "builtins")), "__qualname__": str(record.get("name", "Exception")),
        "__str__": lambda self: message, "__init__": lambda self: BaseException.__init__(self, message)})
    return kind()


def judge_once():
    """The judge: the gold and set-up code, then each test's check on its calls' records."""
    spec = json.loads(sys.stdin.read())
    real = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    for code in (spec["gold"], spec["setup"]):
        if code.strip():
            run(code)
    for test in spec["tests"]:
        with tempfile.TemporaryFile() as printed:
            flush()
            os.dup2(printed.fileno(), 1)
            os.dup2(printed.fileno(), 2)
            NAMESPACE["__icplay_call__"] = CallTable(test["calls"])
            status = run(test["check"])
            flush()
            os.dup2(null, 1)
            os.dup2(null, 2)
            printed.seek(0)
            output = printed.read().decode("utf-8", "replace")
        os.write(real, (JUDGED_MARK + json.dumps({"status": status, "output": output}) + "\n").encode())


def read_request(conn):
    data = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    header, _, body = data.partition(b"\n")
    token, _, kind = header.decode("ascii", "replace").partition(" ")
    return token, kind or "run", body.decode("utf-8", "replace")


HANDLERS = {"run": run, "runs": runs, "probes": probes}


def handle(kind, body):
    return HANDLERS.get(kind, run)(body)


def serve(path):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    SERVER_PID[0] = os.getpid()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)     # input() gets EOF, as every action does in icplay
    while True:
        conn, _ = server.accept()
        with conn:
            token, kind, body = read_request(conn)
            flush()
            os.dup2(conn.fileno(), 1)
            os.dup2(conn.fileno(), 2)
            try:
                status = handle(kind, body)
            except Exception as exc:   # the request loop must outlive a bad request: said on its connection
                print("icplay: %s" % error_line(exc))
                status = "error"
            end_if_forked()
            os.dup2(null, 1)
            os.dup2(null, 2)
            try:
                conn.sendall(("\0ICPLAY-END:%s:%s\n" % (token, status)).encode())
            except OSError:
                pass


if __name__ == "__main__":
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
    if sys.argv[1] == "--judge":
        judge_once()
    else:
        serve(sys.argv[1])
