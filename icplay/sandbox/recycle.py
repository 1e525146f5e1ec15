"""Recycling a used container in place, only when it can be shown to be pristine again.

A fresh container per episode costs Docker a runc start (~0.1-0.2 s of CPU on a small
machine), which caps how many episodes a 2-core machine runs per second. Recycling
puts a used container back to its starting state instead, *and proves it*, or gives up
and the container is removed. The proof runs in the container's **control shell**: a
second bash started with the container (before any action), which the agent cannot
touch because the agent's shell runs with one capability fewer (``setpriv
--bounding-set=-audit_write``), and Linux refuses to let a process ptrace or read the
memory of a process whose capabilities are not a subset of its own.

The control shell, using builtins where it matters:

1. kills every process but pid 1 (the warden) and itself, freeze-then-kill, and checks
   that nothing but zombies is left;
2. checks that no System V IPC object exists (they outlive their processes);
3. lists every file, directory or device whose *inode change time* is later than the
   moment the container was last known pristine, on every writable filesystem of the
   container (root, /dev, /dev/shm, /dev/mqueue, the /etc/hosts-style bind mounts).
   No process without CAP_SYS_TIME can set a ctime: every write, chmod, rename, link
   or unlink moves it (an unlink moves the parent directory's), so the list holds every
   change. The reference time lives in the control shell's memory, not in a file;
4. accepts changes only inside the *restorable roots* (the workdir, /testbed, /root,
   /home, /opt, /tmp, /var/tmp and what git tracks at /), each restored from a copy
   taken when the container was new (``cp -a``: contents, modes, owners and mtimes);
   plus git's index (restored from its copy; ``git status`` rewrites it). Any other change — /etc, /usr, the copies themselves — fails the proof.

On icplay's own images the root filesystem is read-only (writable roots are sized tmpfs
mounts, see ``docker.py``), so nothing outside the restorable roots can change at all,
and the tools the proof runs (find, cp, stat, sleep from /usr/bin) are out of the agent's
reach: none of the writable roots is on the control shell's PATH, and the agent cannot
change that shell's environment.

What it does not defend against, on an image whose root filesystem stays writable (a
task's own image, or ``disk_limit=None``): the tools it runs after the kill come from the
container's own filesystem, so an agent that deliberately replaced them with lying
versions could carry changes into the next episode. Containers are never shared between
runs or processes, so that agent could only affect later episodes of its own run — what
it can already do to its own scores by replacing ``git``, as under InterCode, which
reuses one container for all episodes with ``git reset``. A wall-clock step backwards
during an episode could also hide changes. ``recycle=False`` (``--no-recycle``) gives every episode a new container.
"""

from __future__ import annotations

import base64
import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icplay.sandbox.session import PersistentShell

STASH = "/run/icplay-pristine"
# Where the reward's side commands make their private git folder (envs/bash_facts.py): a
# restorable root of its own, empty when the container is pristine
SCORING_SCRATCH = "/run/icplay-score"

# Restorable roots besides the container's workdir and what git tracks at /.
DEFAULT_ROOTS = ("/testbed", "/root", "/home", "/opt", "/tmp", "/var/tmp")

# Seconds to let pass after marking a container pristine before anything may change it:
# more than one tick of the coarse clock file timestamps come from (10 ms at HZ=100).
CLOCK_SLACK = 0.03
RECYCLE_TIMEOUT = 30.0

def freeze_and_kill(spare: str) -> str:
    """One line of bash that freezes, then kills, every process in the container except
    those whose pid matches the case pattern ``spare``. Builtins only, so it works when a
    fork bomb holds every pid; freezing first catches processes forked meanwhile. The
    Docker sandbox's warden (pid 1) and the control shell both run it."""
    return (
        'seen=" "; for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do fresh=0; '
        f'for d in /proc/[0-9]*; do p=${{d#/proc/}}; case "$p" in {spare}) continue;; esac; '
        'case "$seen" in *" $p "*) continue;; esac; kill -STOP "$p" 2>/dev/null; seen="$seen$p "; fresh=1; done; '
        '[ $fresh = 1 ] || break; done; for p in $seen; do kill -KILL "$p" 2>/dev/null; done'
    )


# Defined in the control shell when the container starts. Functions, not scripts, so that
# the agent cannot swap them; builtins for the kill and process checks, which must work
# when a fork bomb holds every pid.
CONTROL_FUNCTIONS = r"""
__ic_stash=@STASH@
__ic_roots=()
__ic_t0=
__ic_keep=
__ic_prune=()
declare -A __ic_snap=()
__ic_kill_others() {
  local seen fresh round d p
  @KILL_OTHERS@
}
__ic_others() {
  local d p line state rest ppid
  __ic_rest=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$p" in 1|"$$"|"$__ic_keep") continue;; esac
    line=
    read -r line 2>/dev/null < "$d/stat" || continue
    rest=${line##*) }; state=${rest%% *}; rest=${rest#* }; ppid=${rest%% *}
    [ "$state" = Z ] && continue
    # the warden's own `sleep`, started again as soon as the last one was killed
    [ "$ppid" = 1 ] && [ "${line#* }" = "(sleep) $state ${rest}" ] && continue
    __ic_rest="$__ic_rest ${line%%) *})/$state"
  done
}
# __ic_frozen CMD...: run CMD with every other process of the container stopped (pid 1
# and this shell excepted; one the solver stopped itself is left as it was), so that
# nothing changes what CMD reads while it reads it; then let them go on
__ic_frozen() {
  local round d p line rest state fresh frozen=" " rc
  for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    fresh=0
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      case "$p" in 1|"$$") continue;; esac
      case "$frozen" in *" $p "*) continue;; esac
      line=
      read -r line 2>/dev/null < "$d/stat" || continue
      rest=${line##*) }; state=${rest%% *}
      case "$state" in T|t|Z|X) continue;; esac
      kill -STOP "$p" 2>/dev/null && { frozen="$frozen$p "; fresh=1; }
    done
    [ $fresh = 1 ] || break
  done
  "$@"
  rc=$?
  for p in $frozen; do kill -CONT "$p" 2>/dev/null; done
  return $rc
}
# __ic_names DIR: its entry names, as one string in __ic_list (builtins only)
__ic_names() {
  local f
  __ic_list=
  for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    __ic_list="$__ic_list/${f##*/}"
  done
}
# __ic_root_of PATH [MORE...]: the restorable root (or one of MORE) PATH lies in, in __ic_hit
__ic_root_of() {
  local path=$1 r
  shift
  __ic_hit=
  for r in "${__ic_roots[@]}" "$@"; do
    case "$path" in "$r"|"$r"/*) __ic_hit=$r; return 0;; esac
  done
  return 1
}
# __ic_watch DIR: watch DIR and the folders above it (not those inside a root or the
# copies, which are scanned in full): a change of theirs must keep their entries and mode
__ic_watch() {
  local d=${1:-/}
  while :; do
    d=${d:-/}
    if __ic_root_of "$d" "$__ic_stash"; then d=${__ic_hit%/*}; continue; fi
    [ -n "${__ic_snap[$d]+x}" ] && return 0
    __ic_names "$d"; __ic_snap[$d]=$__ic_list
    [ "$d" = / ] && return 0
    d=${d%/*}
  done
}
# File timestamps come from a clock that may lag EPOCHREALTIME by a tick: the sandbox
# lets CLOCK_SLACK pass after a mark before anything runs (DockerSandbox._settle), so
# that every later change has a ctime after __ic_t0.
__ic_mark() {
  __ic_t0=$EPOCHREALTIME
}
# __ic_plan_prune: on overlayfs, the folders of the root filesystem the scan may skip.
# A folder with no entry in the container's own layer cannot hide a change: changing
# anything below it copies it up, which gives it a new ctime. Folders that do hold such
# entries (found once, here: everything made since the container was created) are
# watched. Finding them skips every folder older than the container, by the same
# reasoning: it has nothing of the container's layer below it.
__ic_plan_prune() {
  local type rest dev mnt since d r
  __ic_prune=()
  while read -r dev mnt type rest; do [ "$mnt" = / ] && break; done < /proc/self/mounts
  [ "$type" = overlay ] && [ -e /.dockerenv ] || return 0
  since=$(stat -c %Z /.dockerenv) || return 0
  while IFS= read -r -d '' d; do
    __ic_watch "$d"
  done < <(find / -xdev -type d ! -newerct "@$((since - 2))" -prune -o -newerct "@$((since - 2))" -printf '%h\0' 2>/dev/null)
  for d in "${!__ic_snap[@]}" "${__ic_roots[@]}" "$__ic_stash"; do
    case "$d" in *[][*?\\]*) __ic_prune=(); return 0;; esac   # not expressible as -path
  done
  for d in "${!__ic_snap[@]}"; do __ic_prune+=(! -path "$d"); done
  for r in "${__ic_roots[@]}" "$__ic_stash"; do __ic_prune+=(! -path "$r" ! -path "$r/*"); done
}
__ic_setup() {
  local r d i
  local -a dirs=() modes=() copy=()
  __ic_roots=(); __ic_snap=()
  for r in "$@"; do
    [ -d "$r" ] && [ ! -L "$r" ] || continue
    case " ${__ic_roots[*]} " in *" $r "*) continue;; esac
    __ic_roots+=("$r")
  done
  copy=("${__ic_roots[@]}")
  if [ -f /.git/index ]; then
    # bring the index's file stats up to this container first, so that the reward's
    # `git status` finds nothing to refresh and leaves the index alone
    git -C / status --short >/dev/null 2>&1
    copy+=(/.git/index)
  fi
  rm -rf "$__ic_stash" && mkdir -p "$__ic_stash" || return 1
  if [ ${#copy[@]} -gt 0 ]; then cp -a --parents "${copy[@]}" "$__ic_stash" || return 1; fi
  for r in "${__ic_roots[@]}"; do __ic_watch "${r%/*}"; done
  [ -d /.git ] && __ic_watch /.git        # `git status` replaces the index
  __ic_plan_prune
  dirs=("${!__ic_snap[@]}")
  if [ ${#dirs[@]} -gt 0 ]; then
    mapfile -t modes < <(stat -c '%a %u %g' "${dirs[@]}")
    [ ${#modes[@]} = ${#dirs[@]} ] || return 1
    for i in "${!dirs[@]}"; do __ic_snap[${dirs[$i]}]="${modes[$i]}|${__ic_snap[${dirs[$i]}]}"; done
  fi
  __ic_mark
  echo "icplay-ready ${#__ic_prune[@]} ${__ic_roots[*]}"
}
# __ic_recycle [PID]: kill, prove, restore; PID (a trusted shell kept between golds) survives
__ic_recycle() {
  local round f n line dev mnt type opts rest path r status= failed= index=
  local -a mounts=() restore=()
  __ic_keep=${1:-}
  for round in 1 2 3 4 5; do
    __ic_kill_others; __ic_others
    [ -z "$__ic_rest" ] && break
    sleep 0.05
  done
  [ -z "$__ic_rest" ] || { echo "not pristine: processes survived:$__ic_rest"; return 3; }
  for f in /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem; do
    [ -r "$f" ] || continue
    n=0
    while read -r line; do n=$((n + 1)); done < "$f"
    [ $n -le 1 ] || { echo "not pristine: System V IPC objects left ($f)"; return 3; }
  done
  while read -r dev mnt type opts rest; do
    case ",$opts," in *,rw,*) ;; *) continue;; esac
    case "$type" in proc|sysfs|cgroup|cgroup2|devpts) continue;; esac
    printf -v mnt '%b' "$mnt"
    [ "$mnt" = / ] || mounts+=("$mnt")
  done < /proc/self/mounts
  while IFS= read -r -d '' path; do
    case "$path" in
      icplay-find-status:*) [ "${path#icplay-find-status:}" = 0 ] || failed=1; status=done; continue;;
      /.git/index) index=1; continue;;
    esac
    if [ -n "${__ic_snap[$path]+x}" ]; then
      __ic_names "$path"
      [ "$(stat -c '%a %u %g' "$path")|$__ic_list" = "${__ic_snap[$path]}" ] && continue
      printf 'not pristine: %q changed its entries or mode\n' "$path"; return 3
    fi
    __ic_root_of "$path" || { printf 'not pristine: %q changed\n' "$path"; return 3; }
    case " ${restore[*]} " in *" $__ic_hit "*) ;; *) restore+=("$__ic_hit");; esac
  done < <(
    find / -xdev \( -type d ! -newerct "@$__ic_t0" "${__ic_prune[@]}" -prune \) -o -newerct "@$__ic_t0" -print0 2>&1
    printf 'icplay-find-status:%d\0' $?
    if [ ${#mounts[@]} -gt 0 ]; then
      find "${mounts[@]}" -xdev -newerct "@$__ic_t0" -print0 2>&1
      printf 'icplay-find-status:%d\0' $?
    fi)
  [ "$status" = done ] && [ -z "$failed" ] || { echo "not pristine: the scan failed"; return 3; }
  for r in "${restore[@]}"; do
    find "$r" -mindepth 1 -delete && cp -a "$__ic_stash$r/." "$r/" \
      || { echo "not pristine: could not restore $r"; return 3; }
  done
  if [ -n "$index" ] && [ -f "$__ic_stash/.git/index" ]; then
    cp -a "$__ic_stash/.git/index" /.git/index || { echo "not pristine: could not restore /.git/index"; return 3; }
  fi
  __ic_mark
  echo "icplay-pristine ${restore[*]}"
}
""".replace("@STASH@", STASH).replace("@KILL_OTHERS@", freeze_and_kill('1|"$$"|"$__ic_keep"'))


def take_pristine_copies(control: PersistentShell, workdir: str | None) -> tuple[bool, str]:
    """The control shell copies every restorable root (the defaults, the workdir, the
    image's WORKDIR, what git tracks at /): whether the container can be recycled, and why not."""
    roots = [*DEFAULT_ROOTS, SCORING_SCRATCH]
    if workdir:
        roots.append(workdir)
    found = control.run("pwd -P; git -C / ls-tree --name-only HEAD 2>/dev/null", timeout=30)
    lines = found.output.splitlines()
    if lines:
        roots.append(lines[0])   # the image's WORKDIR, where exec'd shells start
    roots += ["/" + name for name in lines[1:] if name and "/" not in name]
    result = control.run("cd / && __ic_setup " + " ".join(shlex.quote(r) for r in roots if r != "/"),
                         timeout=RECYCLE_TIMEOUT)
    if result.exit_code == 0 and "icplay-ready" in result.output:
        return True, ""
    return False, f"could not take the pristine copies: {result.output.strip()[-300:]}"


def pristine_git(control: PersistentShell) -> dict[str, Any] | None:
    """Git's index and commit as they are before any action, for icplay's memory: the
    strict verdict lists changes against them, whatever the solver does to /.git."""
    found = control.run("[ -f /.git/index ] && /usr/bin/base64 -w0 /.git/index && echo && "
                        "/usr/bin/git -C / rev-parse HEAD && /usr/bin/git -C / ls-tree --name-only HEAD",
                        timeout=30)
    lines = found.output.splitlines()
    if found.exit_code == 0 and len(lines) >= 2:
        return {"index": base64.b64decode(lines[0]), "head": lines[1].strip(),
                "roots": [name for name in lines[2:] if name]}
    return None
