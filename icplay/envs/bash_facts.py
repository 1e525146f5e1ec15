"""What the Bash reward reads in a sandbox, gathered by one script that trusts nothing there.

The solver owns its sandbox, ``/.git`` included (on Docker it may run ``git`` itself), so
the commands icplay runs there for scoring must not run anything it planted:

- every tool by its absolute path, under ``env -i`` (no ``PATH``, ``BASH_ENV``,
  ``LD_PRELOAD``, alias or function of the solver's reaches it), with the capabilities of
  the solver's own shell (the sandbox runs it so: see ``DockerSandbox.exec``);
- ``git`` never reads the repository's configuration, hooks or any file of ``.git`` that
  holds code: it runs with ``GIT_DIR`` pointing at a private folder made for this one
  call (icplay's own ``config``; ``HEAD`` copied as a checked value; the solver's refs,
  objects, exclude file and index linked in as *data*), system and global configuration
  off, ``core.hooksPath=/dev/null``, ``core.fsmonitor=false``, no untracked cache, no
  optional locks (so no index write and no ``post-index-change`` hook);
- files it must not block on (a FIFO named ``.git/HEAD`` or ``.git/index``) are checked
  to be regular files first;
- the sandbox's other processes are frozen while it runs (``exec`` does so), so nothing
  swaps a path between the listing and its hash.

It prints two listings of ``git status --porcelain -z``: the *reward's*, over the
solver's own index and HEAD (InterCode's reward reads those: ``git add`` turns ``??``
into ``A``), and the *strict* one, over the pristine index and commit icplay kept from
before the episode (on Docker; bwrap's ``.git`` is out of the solver's reach anyway),
with the files .gitignore hides listed too (``!!``), so that an index or ignore file the
solver edited hides nothing from the strict verdict. Then two hashes of every path asked
for: the reward's content hash (InterCode compares contents) and the strict one (content,
type and the owner's execute bit: ``chmod +x`` is a change git sees).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any, Protocol

from icplay.envs.bash_reward import Change
from icplay.sandbox.base import SandboxError

# The strict listing keeps ignored entries (``!!``) only under the folders git tracks at
# the root: what a system folder ignored by the image's /.gitignore holds (/tmp, /var) is
# no part of any task's answer, on either side.
IGNORED = "!!"

TOOL_PATH = "/usr/bin:/bin"

# $1 nonce, $2 pristine index (base64; ? when icplay sends it only if asked: the script prints
# its ask section when the solver's index or HEAD moved; - for the repository's own), $3 its md5, $4
# pristine HEAD (or -), $5 scratch folder (or - for mktemp's default), $6 the top-level
# names git tracks, joined by '/'. It hashes every path its listings name. cwd: the
# worktree's root (/ on Docker, the episode's root folder on bwrap), whose .git it reads. Few processes: every one costs a fork on a busy machine.
FACTS_SCRIPT = r"""
n=$1 pristine=$2 psum=$3 phead=$4 scratch=$5 roots=/$6/
wt=$PWD
[ -d "$wt/.git" ] && [ ! -L "$wt/.git" ] || { printf '\0%s:fatal\0no repository at %s' "$n" "$wt"; exit 0; }
if [ "$scratch" = - ]; then priv=$(/usr/bin/mktemp -d) || exit 3
else priv=$scratch/g.$$; /usr/bin/mkdir -m 700 -- "$priv" || exit 3; fi
trap '/usr/bin/rm -rf -- "$priv"' EXIT
printf '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = false\n' > "$priv/config"
links=()
for name in objects refs info; do [ -d "$wt/.git/$name" ] && links+=("$wt/.git/$name"); done
[ -f "$wt/.git/packed-refs" ] && links+=("$wt/.git/packed-refs")
[ ${#links[@]} = 0 ] || /usr/bin/ln -s -- "${links[@]}" "$priv/"
head=
[ -f "$wt/.git/HEAD" ] && IFS= read -r head < "$wt/.git/HEAD"
if [[ ! $head =~ ^(ref:\ refs/[A-Za-z0-9._/-]+|[0-9a-f]{40})$ ]]; then head=${phead#-}; fi
[ -n "$head" ] || head="ref: refs/heads/main"
printf '%s\n' "$head" > "$priv/HEAD"
run_git() {   # $1 index file, then git's arguments
  local index=$1; shift
  GIT_INDEX_FILE=$index /usr/bin/timeout 60 /usr/bin/git -c core.hooksPath=/dev/null -c core.fsmonitor=false \
    -c core.untrackedCache=false -c core.splitIndex=false -c core.excludesFile=/dev/null \
    -c core.attributesFile=/dev/null -c core.ignoreStat=false -c core.sparseCheckout=false -c index.sparse=false \
    -c 'safe.directory=*' -c core.pager=cat -c status.showUntrackedFiles=normal -c status.renames=true \
    --no-optional-locks "$@"
}
export HOME=/nonexistent XDG_CONFIG_HOME=/nonexistent LC_ALL=C GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
  GIT_ATTR_NOSYSTEM=1 GIT_NO_REPLACE_OBJECTS=1 GIT_OPTIONAL_LOCKS=0 GIT_TERMINAL_PROMPT=0 GIT_PAGER=cat PAGER=cat \
  GIT_DIR=$priv GIT_WORK_TREE=$wt
paths=()
listing() {   # $1 section name, $2 index, then status options: header, body, exit code
  local name=$1 index=$2 code e p old; shift 2
  printf '\0%s:%s\0' "$n" "$name"
  if [ ! -f "$index" ]; then printf 'the index is not a regular file\0%s:%s-exit\0%d' "$n" "$name" 1; return; fi
  run_git "$index" status --porcelain -z --untracked-files=normal "$@" > "$priv/out" 2> "$priv/err"
  code=$?
  if [ $code = 0 ]; then
    # printed back and its paths kept, with builtins (no process more)
    while IFS= read -r -d '' e; do
      printf '%s\0' "$e"
      p=${e:3}
      case ${e:0:2} in *R*|*C*) IFS= read -r -d '' old && printf '%s\0' "$old";; esac
      # an ignored entry counts only below a folder git tracks (not /proc, /tmp, ...)
      [ "${e:0:2}" = '!!' ] && [[ $roots != */"${p%%/*}"/* ]] && continue
      paths+=("$p")
    done < "$priv/out"
  else
    /usr/bin/head -c 2000 -- "$priv/err"
  fi
  printf '\0%s:%s-exit\0%d' "$n" "$name" "$code"
}
strict_index=$wt/.git/index same=1
if [ "$pristine" != - ]; then
  # the solver's index and HEAD as they were: one listing serves both
  sum= ref=
  [ -f "$wt/.git/index" ] && read -r sum _ < <(/usr/bin/md5sum < "$wt/.git/index")
  [ "$head" = "ref: refs/heads/main" ] && [ -f "$wt/.git/refs/heads/main" ] && IFS= read -r ref < "$wt/.git/refs/heads/main"
  if [ "$sum" != "$psum" ] || [ "$ref" != "$phead" ]; then
    same=
    [ "$pristine" = '?' ] && { printf '\0%s:ask\0' "$n"; exit 0; }
    printf '%s' "$pristine" | /usr/bin/base64 -d > "$priv/pristine-index" 2>/dev/null
    strict_index=$priv/pristine-index
  fi
fi
if [ -n "$same" ]; then
  listing both "$strict_index" --ignored=matching
else
  listing reward "$wt/.git/index"
  printf '%s\n' "$phead" > "$priv/HEAD"
  listing strict "$strict_index" --ignored=matching
fi
printf '\0%s:hashes\0' "$n"
declare -A seen=()
files=()
for p in "${paths[@]}"; do
  p=${p%/}
  [ -n "$p" ] && [ -z "${seen[$p]+x}" ] || continue
  seen[$p]=1
  q=$p via=
  while [[ $q == */* ]]; do q=${q%/*}; [ -L "$q" ] && via=1; done
  if [ -n "$via" ]; then
    h=through-link; s=$h   # below a symlink: never followed (on bwrap it would lead to the host's files)
  elif [ -L "$p" ]; then
    h=$(/usr/bin/readlink -- "$p" | /usr/bin/md5sum); h=link:${h%% *} s=$h
  elif [ -d "$p" ]; then
    # h: md5 of the files' md5sum lines in name order; s: md5 of h, every entry's type and
    # name, and the executable files' names, as lines tagged a, e and x sorted together (each
    # list sorted, in that order). One find lists them all; cd here, not in a subshell, and
    # results through files: every process costs a fork.
    if cd -P -- "$p" 2>/dev/null; then
      /usr/bin/find . -type f -fprint0 "$priv/f" , ! -name . -printf 'e %y %p\n' , -type f -perm -u+x -printf 'x %p\n' \
        > "$priv/l"
      /usr/bin/sort -z -- "$priv/f" | /usr/bin/xargs -0 -r /usr/bin/md5sum | /usr/bin/md5sum > "$priv/h"
      read -r h _ < "$priv/h"
      printf 'a %s\n' "$h" >> "$priv/l"
      /usr/bin/sort -- "$priv/l" | /usr/bin/md5sum > "$priv/s"
      read -r s _ < "$priv/s"
      cd -- "$wt" || exit 3
    else
      h= s=d41d8cd98f00b204e9800998ecf8427e   # a folder cd cannot enter: no listing, the md5 of nothing
    fi
  elif [ -f "$p" ]; then
    files+=("$p"); continue   # hashed together below
  elif [ -e "$p" ]; then
    h=special; s=special   # a FIFO or device: never read it (a FIFO would block the scoring)
  else
    h=missing; s=missing
  fi
  printf '%s\0%s\0%s\0' "$p" "$h" "$s"
done
if [ ${#files[@]} -gt 0 ]; then
  # by name, not by position: a file md5sum cannot read is left out of its output
  declare -A sums=() modes=()
  while IFS= read -r -d '' x; do sums[${x#*  }]=${x%%  *}; done < <(/usr/bin/md5sum -z -- "${files[@]}" 2>/dev/null)
  while IFS= read -r -d '' x; do modes[${x#* }]=${x%% *}; done < <(/usr/bin/stat --printf '%A %n\0' -- "${files[@]}" 2>/dev/null)
  for p in "${files[@]}"; do
    h=${sums[$p]:-unreadable} s=
    case ${modes[$p]:-} in ???x*) s=:x;; esac
    printf '%s\0%s\0%s\0' "$p" "$h" "$h$s"
  done
fi
printf '\0%s:end\0' "$n"
"""


@dataclass
class Facts:
    """What one sandbox holds, as the reward and the strict verdict read it."""

    changes: list[Change]                    # the reward's listing (the solver's own index)
    strict_changes: list[Change]             # against the pristine index, ignored files included
    hashes: dict[str, str] = field(default_factory=dict)          # the reward's content hashes
    strict_hashes: dict[str, str] = field(default_factory=dict)   # content, type and execute bit
    errors: list[str] = field(default_factory=list)                # listings git could not make


def parse_porcelain(data: str) -> list[Change]:
    """(status, path) pairs from ``git status --porcelain -z``: the status stripped of
    spaces, as InterCode's split leaves it; a rename or copy names its new path."""
    changes: list[Change] = []
    entries = data.split("\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4 or entry[2] != " ":
            continue
        status = entry[:2].strip()
        if "R" in status or "C" in status:
            index += 1   # the old path follows
        if status:
            changes.append((status, entry[3:]))
    return changes


def _sections(output: str, nonce: str) -> dict[str, str]:
    """The script's sections by name (``NAME-exit`` holds a listing's exit code)."""
    parts = output.split("\0" + nonce + ":")
    found: dict[str, str] = {}
    for part in parts[1:]:
        name, _, body = part.partition("\0")
        found[name] = body
    return found


class FactsSource(Protocol):
    """What ``gather`` needs of a sandbox: every ``Sandbox`` has it, and so has Harbor's
    verifier, which reads the container it runs in."""

    @property
    def kind(self) -> str: ...
    @property
    def pristine_git(self) -> dict[str, Any] | None: ...
    @property
    def scoring_scratch(self) -> str | None: ...
    def exec(self, argv: list[str], timeout: float = 30.0) -> tuple[int, str]: ...


def gather(sandbox: FactsSource) -> Facts:
    """The sandbox's listings and the hashes of every path they name.

    Nothing of the gold's goes in: the solver's copy hashes its own changed paths (every
    path the reward or the verdict compares is among them when the listings agree), so
    the command line a process of the sandbox might read (/proc/PID/cmdline, where no
    freeze holds it) names nothing it could learn from.

    The sandbox's ``pristine_git`` (kept before any action) gives the pristine index
    (``index``, bytes; None: the repository's own is out of the solver's reach), commit
    (``head``) and the top-level names git tracks (``roots``: the strict listing's ignored
    entries count only below them; none known, none count). ``scoring_scratch``: a folder
    for the call's private git folder (None: mktemp's)."""
    nonce, code, output = _run_script(sandbox, with_index=False)
    found = _sections(output, nonce)
    if "ask" in found:       # the solver's index or HEAD moved: the strict listing needs the pristine index
        nonce, code, output = _run_script(sandbox, with_index=True)
        found = _sections(output, nonce)
    if "end" not in found:
        raise SandboxError(f"the {sandbox.kind} sandbox's scoring facts could not be read "
                           f"(exit {code}): {output.strip()[-300:]}")
    errors = [found["fatal"].strip()[:300]] if "fatal" in found else []
    if "both" in found:
        found["reward"], found["strict"] = found["both"], found["both"]
        found["reward-exit"] = found["strict-exit"] = found.get("both-exit", "1")
    listings = {}
    for name in ("reward", "strict"):
        body = found.get(name, "missing")
        if found.get(f"{name}-exit") != "0":
            errors.append(f"git status ({name}) failed: {body.strip()[:300]}")
            listings[name] = [("error", f"git status failed: {body.strip()[:200]}")]
        else:
            listings[name] = parse_porcelain(body)
    roots = {r.strip("/") for r in (sandbox.pristine_git or {}).get("roots") or ()}
    reward = [(s, p) for s, p in listings["reward"] if s != IGNORED]
    strict = [(s, p) for s, p in listings["strict"] if s != IGNORED or p.split("/", 1)[0] in roots]
    hashes, strict_hashes = {}, {}
    fields = found["hashes"].split("\0")
    for i in range(0, len(fields) - 2, 3):
        hashes[fields[i]] = fields[i + 1]
        strict_hashes[fields[i]] = fields[i + 2]
    return Facts(reward, strict, hashes, strict_hashes, errors)


def _run_script(sandbox: FactsSource, with_index: bool) -> tuple[str, int, str]:
    """(nonce, exit code, output) of one run of FACTS_SCRIPT, frozen. The pristine index (10 kB and
    more as base64, which the sandbox's shell parses on every call) goes only ``with_index``;
    otherwise the script asks for it when it needs it."""
    nonce = "icplay-facts-" + secrets.token_hex(8)
    pristine = sandbox.pristine_git or {}
    index = pristine.get("index")
    sent = (base64.b64encode(index).decode() if with_index else "?") if index else "-"
    argv = ["/usr/bin/env", "-i", f"PATH={TOOL_PATH}", "/bin/bash", "--noprofile", "--norc", "-c", FACTS_SCRIPT,
            "icplay-facts", nonce, sent, hashlib.md5(index).hexdigest() if index else "-", pristine.get("head") or "-",
            sandbox.scoring_scratch or "-", "/".join(pristine.get("roots") or ())]
    code, output = sandbox.exec(argv, timeout=150)
    return nonce, code, output
