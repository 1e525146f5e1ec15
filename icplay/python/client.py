"""icplay's Python client: runs INSIDE the sandbox, one process per request.

Started as ``python3 -I -S -c CLIENT SESSION KIND SERVER`` (no file of icplay's in the
sandbox: both programs travel on the command line). Reads the request's body on stdin,
hands it to the session's interpreter server (starting one when there is none: the first
action, or after a timeout killed it), and copies what the code prints to stdout until
the server's end marker. Exit status: 0 the code ran,
1 it raised (the traceback's last line was printed), 3 the interpreter exited while
running it (``os._exit``), 4 no interpreter could be started.
"""

import os
import secrets
import socket
import subprocess
import sys
import time

HOME = "/tmp/.icplay-python"       # the sockets, one per session
# one interpreter per session name: the episode's ("main"), or a pristine one for a gold
if __name__ == "__main__":   # run as the client (imported, e.g. by a check of every module, it only defines)
    SESSION, KIND, SERVER = sys.argv[1], sys.argv[2], sys.argv[3]
    SOCKET = os.path.join(HOME, SESSION + ".sock")


def connect():
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(SOCKET)
    return conn


def start_server():
    os.makedirs(HOME, mode=0o700, exist_ok=True)
    if os.path.exists(SOCKET):
        os.unlink(SOCKET)
    subprocess.Popen([sys.executable, "-I", "-c", SERVER, SOCKET], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                     cwd=os.getcwd())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            return connect()
        except OSError:
            time.sleep(0.02)
    return None


def main():
    code = sys.stdin.buffer.read()
    try:
        conn = connect()
    except OSError:
        conn = start_server()
        if conn is None:
            sys.stdout.write("icplay: the Python interpreter did not start\n")
            return 4
    token = secrets.token_hex(8)
    conn.sendall(("%s %s\n" % (token, KIND)).encode() + code)
    conn.shutdown(socket.SHUT_WR)
    end = ("\0ICPLAY-END:%s:" % token).encode()
    out = sys.stdout.buffer
    pending = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            out.write(pending)
            out.flush()
            return 3
        pending += chunk
        at = pending.find(end)
        if at >= 0 and b"\n" in pending[at + len(end):]:
            out.write(pending[:at])
            out.flush()
            status = pending[at + len(end):].split(b"\n", 1)[0]
            return 0 if status == b"ok" else 1
        # write all but what may be the start of the end marker (it starts with a NUL)
        cut = pending.rfind(b"\0") if at < 0 else at
        if cut < 0:
            cut = len(pending)
        if cut > 0:
            out.write(pending[:cut])
            out.flush()
            pending = pending[cut:]


if __name__ == "__main__":
    sys.exit(main())
