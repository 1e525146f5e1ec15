#!/usr/bin/env bash
# The README's test command: provision Docker and the host tools, install the package in
# .venv, build the task images, run the tests. CI runs it through .ci/run, unattended
# (CI=true, no stdin), in a fresh clone of main with ../shared beside it for the tests that
# use InterCode's data and the reward vectors.
#
#   bash ci/test.sh         (from anywhere; needs root or password-less sudo for provisioning)
#
# Settings: PYTHON (interpreter for the venv, default python3); SKIP_PROVISION=1 to leave
# apt/dockerd/base image alone; anything ci/provision-docker.sh reads (DOCKERD_ARGS, ...).
set -euo pipefail
exec </dev/null
cd "$(dirname "$0")/.."

# Under CI=true a Docker, bwrap or MariaDB test that cannot run fails instead of skipping
# (tests/conftest.py); this script is the CI, so that is the default here.
export CI=${CI:-true}
export PIP_DISABLE_PIP_VERSION_CHECK=1
PYTHON=${PYTHON:-python3}
START=$SECONDS
step() { printf '\n=== %s (at %ds)\n' "$*" "$((SECONDS - START))"; }

step "provision: apt packages, dockerd, debian:bookworm-slim"
if [ "${SKIP_PROVISION:-0}" = 1 ]; then
    echo "skipped (SKIP_PROVISION=1)"
else
    bash ci/provision-docker.sh
fi

# Installs with uv, which resolves and installs the ~180 packages several times faster than pip. uv
# does not read pip's configuration, so pip's find-links (where this machine keeps its CPU build of
# torch) are passed on; without them uv would take PyPI's CUDA build. pip is the fallback where uv
# cannot be had (the line says so).
FIND_LINKS=()
for folder in $("$PYTHON" -m pip config get global.find-links 2>/dev/null || true) ${PIP_FIND_LINKS:-}; do
    FIND_LINKS+=(--find-links "$folder")
done
install() {   # install VENV_PYTHON REQUIREMENT...
    local python=$1; shift
    if "$python" -m pip install -q uv && "$python" -m uv pip install -q --python "$python" "${FIND_LINKS[@]}" "$@"; then
        return 0
    fi
    echo "note: uv could not install $*; pip instead" >&2
    "$python" -m pip install -q "$@"
}

step "python: .venv with icplay[dev,serve-test,trl]"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# serve-test: torch (CPU, 2.13.0: this machine's local wheel) and transformers[serving], for the test
# against a real `transformers serve`; trl: the TRL door's GRPO test (tests/test_trl_grpo.py) on CPU.
install .venv/bin/python -e '.[dev,serve-test,trl]'
.venv/bin/python --version

step "harbor: .venv-harbor (Python 3.12) with the harbor package, for tests/test_harbor_export.py's lint"
# Harbor needs Python >= 3.12 and pins what icplay's venv would conflict with: its own venv.
# Under CI=true a failed install fails CI (the lint test would fail anyway, not skip).
# The first interpreter that really runs and is 3.12 or later: a pyenv shim can exist on PATH
# and still refuse to run ("pyenv: python3.12: command not found" when 3.12 is not selected).
python_312() {
    local candidate
    for candidate in "${HARBOR_PYTHON:-}" "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12*/bin/python3.12 \
                     "$(command -v python3.13 || true)" "$HOME"/.pyenv/versions/3.13*/bin/python3.13; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] \
           && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
}
HARBOR_PYTHON=$(python_312)
if [ ! -x .venv-harbor/bin/harbor ]; then
    if [ -z "$HARBOR_PYTHON" ] || ! { "$HARBOR_PYTHON" -m venv .venv-harbor && install .venv-harbor/bin/python harbor; }; then
        echo "FAIL: could not install the harbor package in .venv-harbor (HARBOR_PYTHON=${HARBOR_PYTHON:-none})" >&2
        if [ "$CI" = true ]; then exit 1; fi
    fi
fi
# (sed reads to the end: `head` would close the pipe early, and pipefail would stop the script)
if [ -x .venv-harbor/bin/harbor ]; then .venv-harbor/bin/python -m pip show harbor | sed -n 1,2p; fi

step "images: build (cached layers make an unchanged image instant)"
.venv/bin/icplay images build
docker image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | grep -E '^(icplay-|debian:bookworm-slim)' || true
# the same Dockerfiles built for Podman (tests/test_podman.py; MariaDB for tests/test_podman_doors.py; its API
# service is started by icplay). InterCode's NL2Bash image for Podman is built by the test's fixture from ../shared.
.venv/bin/icplay images build bash python ctf sql --sandbox podman

if [ ! -d ../shared ]; then
    echo "note: ../shared is not beside this checkout; tests that need it will skip"
fi

# Four workers on two cores: most tests wait on Docker, bubblewrap, MariaDB or a subprocess rather than
# compute, so two per core keep both busy (docs/architecture.md#tests says what keeps tests independent).
# --durations lists the slowest tests, the figures each round's note justifies.
WORKERS=${PYTEST_WORKERS:-4}
step "tests: .venv/bin/python -m pytest -q -rs -n $WORKERS --durations=25"
status=0
.venv/bin/python -m pytest -q -rs -n "$WORKERS" --durations=25 || status=$?
if [ "$status" -eq 5 ]; then
    echo "FAIL: pytest collected no tests" >&2
    exit 1
fi
step "done: pytest exit status $status"
exit "$status"
