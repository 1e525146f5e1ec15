#!/usr/bin/env bash
# Wheel smoke test: what a user gets from `pip install icplay`, away from any checkout.
# Builds the wheel, installs it into a fresh venv in a temporary folder, and from another
# folder (no ICPLAY_ROOT, a temporary ICPLAY_HOME and cache) runs: `icplay tasks`,
# `python -m icplay`, a plain SQL episode (SQLite), a plain Bash episode on bwrap, the TUI
# in tmux drawing its picker, and checks that image inputs match the checkout's (so images
# built from either are the same and `doctor` does not call them out of date).
#
#   bash ci/wheel-smoke.sh          (PYTHON=python3.x to choose the interpreter; KEEP=1 keeps the folder)
#
# Needs network access to the package index (build requirements and icplay's dependencies),
# bubblewrap and tmux. Exits non-zero with a line saying which step failed.
set -euo pipefail
exec </dev/null
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
WORK="$(mktemp -d "${TMPDIR:-/tmp}/icplay-wheel-smoke.XXXXXX")"
SESSION="icplay-smoke-$$"
cleanup() {
    tmux kill-session -t "$SESSION" 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
fail() { echo "wheel-smoke: FAIL: $*" >&2; exit 1; }
step() { printf '\n--- wheel-smoke: %s\n' "$*"; }

step "build the wheel"
# From a copy without build leftovers (a stale build/lib would slip old files into the wheel).
mkdir -p "$WORK/src"
tar -C "$REPO" --exclude=./.git --exclude=./.venv --exclude=./build --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude=.pytest_cache -cf - . | tar -C "$WORK/src" -xf -
"$PYTHON" -m pip wheel --no-deps -q -w "$WORK/dist" "$WORK/src" > "$WORK/pip-wheel.log" 2>&1 \
    || { tail -30 "$WORK/pip-wheel.log"; fail "pip wheel"; }
WHEEL=$(ls "$WORK"/dist/icplay-*.whl)
echo "$WHEEL"

step "install it into a fresh venv outside the checkout"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q "$WHEEL" > "$WORK/pip-install.log" 2>&1 \
    || { tail -30 "$WORK/pip-install.log"; fail "pip install the wheel"; }
BIN="$WORK/venv/bin"

# Run from an unrelated folder with nothing of the checkout reachable.
mkdir -p "$WORK/elsewhere" "$WORK/home" "$WORK/cache"
cd "$WORK/elsewhere"
unset ICPLAY_ROOT ICPLAY_INTERCODE PYTHONPATH
export ICPLAY_HOME="$WORK/home" ICPLAY_CACHE="$WORK/cache"
where=$("$BIN/python" -c 'import icplay; print(icplay.__file__)')
case "$where" in "$WORK/venv/"*) ;; *) fail "icplay imported from $where, not the venv";; esac

step "icplay tasks"
"$BIN/icplay" tasks | tee "$WORK/tasks.txt"
grep -Eq '^bash +bash +[1-9][0-9]* ' "$WORK/tasks.txt" || fail "icplay tasks lists no bundled Bash tasks"
grep -Eq '^sql +sql +[1-9][0-9]* ' "$WORK/tasks.txt" || fail "icplay tasks lists no bundled SQL tasks"

step "python -m icplay"
"$BIN/python" -m icplay tasks >/dev/null || fail "python -m icplay tasks"

step "plain SQL episode (SQLite)"
printf 'SELECT 1;\nsubmit\n' | "$BIN/icplay" play sql --plain --sandbox sqlite 2>&1 | tee "$WORK/sql.txt"
grep -q '^reward: ' "$WORK/sql.txt" || fail "the SQL episode printed no reward"
find "$ICPLAY_HOME/trajectories" -path '*/sql/*.json' | grep -q . || fail "the SQL episode saved no trajectory"

step "plain Bash episode (bwrap)"
printf 'ls -a /testbed\nsubmit\n' | "$BIN/icplay" play bash --plain --sandbox bwrap 2>&1 | tee "$WORK/bash.txt"
grep -q '\.editorconfig' "$WORK/bash.txt" || fail "the bwrap testbed lacks its dotfiles"
grep -q '^reward: ' "$WORK/bash.txt" || fail "the Bash episode printed no reward"
if find "$ICPLAY_CACHE" -name __pycache__ | grep -q .; then fail "the unpacked testbed has __pycache__ folders"; fi

step "image inputs match the checkout's"
for env in bash sql; do
    mine=$("$BIN/python" -c "from icplay.sandbox.images import build_inputs_digest as d; print(d('$env'))")
    theirs=$(cd "$REPO" && env -u ICPLAY_CACHE "$PYTHON" -c "
import sys; sys.path.insert(0, '.')
from icplay.sandbox.images import build_inputs_digest as d; print(d('$env'))")
    [ "$mine" = "$theirs" ] || fail "$env image inputs differ: wheel $mine, checkout $theirs"
    echo "$env: $mine"
done

if docker info >/dev/null 2>&1; then
    step "doctor: images built from the checkout count as current"
    "$BIN/icplay" doctor 2>&1 | tee "$WORK/doctor.txt" || true
    if grep -q 'out of date' "$WORK/doctor.txt"; then fail "doctor calls the images out of date"; fi
fi

step "the TUI in tmux draws its picker"
tmux new-session -d -s "$SESSION" -x 140 -y 40 \
    "env ICPLAY_HOME='$ICPLAY_HOME' ICPLAY_CACHE='$ICPLAY_CACHE' TERM=xterm-256color '$BIN/icplay' play; sleep 30"
drawn=0
for _ in $(seq 1 60); do
    sleep 0.5
    tmux capture-pane -p -t "$SESSION" > "$WORK/screen.txt" 2>/dev/null || true
    if grep -q 'Task sets' "$WORK/screen.txt" && grep -q 'b001' "$WORK/screen.txt"; then drawn=1; break; fi
done
cat "$WORK/screen.txt"
[ "$drawn" = 1 ] || fail "the picker (Task sets, task b001) did not appear within 30 s"
tmux send-keys -t "$SESSION" C-q 2>/dev/null || true

echo
echo "wheel-smoke: OK"
