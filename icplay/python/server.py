"""icplay's Python interpreter server: runs INSIDE the sandbox, never in icplay's process.

Started by client.py on first use (``python3 server.py SOCKET``); it keeps one namespace
for the whole episode and runs one request at a time. A request is the client's token
line and the code; while the code runs, file descriptors 1 and 2 are the connection, so
print(), os.system() and forked children all reach the client. The end of a request is
``\\0ICPLAY-END:<token>:<status>\\n`` (status ok or error). Standard library only; it must
run on any python3 >= 3.8.
"""

import ast
import os
import socket
import sys
import traceback

NAMESPACE = {"__name__": "__main__", "__builtins__": __builtins__}


def error_line(exc):
    """The traceback's last line: ``NameError: name 'x' is not defined``."""
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type(exc).__name__


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
        try:
            sys.stdout.flush()
        except Exception:
            pass
        print(error_line(exc))
        return "error"
    return "ok"


def read_request(conn):
    data = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    token, _, code = data.partition(b"\n")
    return token.decode("ascii", "replace"), code.decode("utf-8", "replace")


def serve(path):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    me = os.getpid()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)     # input() gets EOF, as every action does in icplay
    while True:
        conn, _ = server.accept()
        with conn:
            token, code = read_request(conn)
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(conn.fileno(), 1)
            os.dup2(conn.fileno(), 2)
            status = run(code)
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                pass
            if os.getpid() != me:    # a fork in the code: the child's part ends with its code
                os._exit(0)
            os.dup2(null, 1)
            os.dup2(null, 2)
            try:
                conn.sendall(("\0ICPLAY-END:%s:%s\n" % (token, status)).encode())
            except OSError:
                pass


if __name__ == "__main__":
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
    serve(sys.argv[1])
