"""The persistent shell leaves no trace of its own machinery for an action to see, on both
sandboxes: errors read as under ``bash -c`` (``bash: line N:``), no function of icplay's
is defined while an action runs, no variable of icplay's is set (session.command_loop).

The sandbox's identity is not the shell's machinery and stays: icplay's own containers are
named ``icplay`` (HOSTNAME) and bwrap runs the action as the user ``icplay``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

IDENTITY = ("HOSTNAME=", "USER=", "LOGNAME=")
# The one trace left: the action runs inside a function (so that a stop can abandon it,
# however deeply nested), which bash lists in its call stack; the function itself is gone.
CALL_STACK = 'FUNCNAME=([0]="__ic_run" [1]="source")\n'


@pytest.fixture(scope="module")
def bwrap_root(tmp_path_factory, bwrap_ready) -> Path:
    from icplay.sandbox.bwrap import make_root_template

    base = tmp_path_factory.mktemp("traces")
    (base / "src" / "dir").mkdir(parents=True)
    return make_root_template(base / "src", None, base)


@pytest.fixture(params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def box(request):
    if request.param == "bwrap":
        from icplay.sandbox.bwrap import BwrapSandbox

        sandbox = BwrapSandbox(request.getfixturevalue("bwrap_root"), timeout=2)
    else:
        from icplay.sandbox.docker import DockerSandbox

        sandbox = DockerSandbox(request.getfixturevalue("docker_client"), request.getfixturevalue("bash_image"),
                                timeout=2)
    sandbox.start()
    yield sandbox
    sandbox.close()


def _traces(box) -> tuple[str, str]:
    functions = box.run("declare -F").output
    variables = box.run("set | grep -i -e icplay -e __ic").output
    return functions, "".join(line for line in variables.splitlines(True) if not line.startswith(IDENTITY) and line != CALL_STACK)


def test_errors_read_as_bash_c(box):
    assert box.run("nosuchcmd").output == "bash: line 1: nosuchcmd: command not found\n"
    assert box.run("true\n\nnosuch").output == "bash: line 3: nosuch: command not found\n"
    assert box.run("f() { nosuch; }; f").output == "bash: line 1: nosuch: command not found\n"
    # a stray break or continue stays in the action, as under bash -c (why the action runs
    # inside a function: at the loop's own level it would leave icplay's loop)
    for word in ("break", "continue 3"):
        assert box.run(f"{word}; echo after").output == (
            f"bash: line 1: {word.split()[0]}: only meaningful in a `for', `while', or `until' loop\nafter\n")
    # a syntax error is eval's own (the action is read by eval, not by bash -c)
    assert box.run("echo 'open").output.startswith("bash: eval: line 1: unexpected EOF")


def test_no_function_or_variable_of_icplay_is_visible(box):
    assert _traces(box) == ("", "")
    # nor after a stopped action, an action that failed, or one that defined its own
    box.run("cd /tmp; KEEP=1; g() { echo mine; }")
    assert box.run("sleep 30").timed_out
    assert box.run("false").exit_code == 1
    assert box.run("echo $?").output == "1\n"          # the previous action's status
    assert box.run('echo "$# ${1-none}"').output == "0 none\n"   # no arguments, as under bash -c
    assert box.run("declare -F").output == "declare -f g\n"
    assert box.run("unset -f g; set | grep -i -e __ic -e icplay | grep -v -e ^HOSTNAME= -e ^USER= -e ^LOGNAME= -e ^FUNCNAME=; "
                   "echo $PWD $KEEP").output == "/tmp 1\n"


def test_the_start_folder_is_gone_and_the_working_folder_kept(box):
    start = box.run("pwd").output
    assert box.run("ls -a /dev/shm /tmp 2>/dev/null | grep -c '^\\.bash'; echo \"${OLDPWD-unset}\"").output == "0\nunset\n"
    assert box.run("pwd").output == start


def test_functions_named_like_builtins_do_not_reach_the_command_loop(box):
    """The loop runs in the action's shell, so an action's function named like a command the
    loop uses would run between actions: a fork bomb defined as ``:`` re-armed itself on
    every turn of a ``while :`` and held the shell in bash's fork retries."""
    box.run(":() { echo hijacked-colon; }; true() { echo hijacked-true; }; read() { echo hijacked-read; }")
    assert box.run("echo next").output == "next\n"
    assert box.run("echo again").output == "again\n"
