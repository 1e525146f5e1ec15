"""Take the action out of a model's reply, tolerating the usual sloppiness, never running prose.

What counts as an action, in order:

1. a fenced block (```sql ... ```, ``` ... ```, ~~~bash ... ~~~; an unclosed fence is read
   too, but the policy never runs it: ``leaves_fence_open`` marks the reply cut): the first
   block whose label is the task's language (or one of its aliases) or has no label; blocks labelled with another language (``text``, ``output``,
   ``json``) are skipped. A lone language name on the fence's first line (```\\nsql\\n...)
   is dropped, and so are shell prompts (``$ ``, ``mysql> ``) when every line has one;
2. after the strategy's ``Action:`` marker: a fenced block there, else the rest of the
   line (and the lines after it up to a blank line or the next ``Thought:``/``Observation:``);
3. one inline code span that is the whole reply or the whole Action;
4. a bare reply that *looks like code* — SQL starting with a statement keyword; a shell
   line starting with a known command, a path or a variable; Python starting with
   ``def``/``import``/an assignment — and contains nothing that reads as a sentence.

``submit`` (alone, in a fence or after ``Action:``) is the submit action. Anything else is
unparsable: the caller sends :func:`retry_message` back to the model instead of executing
the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from icplay.languages import Prompts, all_specs, find


def language_prompts(language: str) -> Prompts:
    """How the language's spec speaks of it (a language without a spec: its own name)."""
    spec = find(language)
    if spec is not None:
        return spec.prompts
    return Prompts(name=language, setting=language, fence=language, fence_aliases=(language,), submit_arg=True)


def fence_label(language: str) -> str:
    p = language_prompts(language)
    return p.fence or language


def language_name(language: str) -> str:
    return language_prompts(language).name


def _labels(language: str) -> tuple[str, ...]:
    return language_prompts(language).fence_aliases or (language,)


def _known_labels() -> set[str]:
    return {label for spec in all_specs() for label in spec.prompts.fence_aliases}


SQL_START = re.compile(
    r"^\s*(select|with|show|describe|desc|explain|pragma|insert|update|delete|create|drop|alter|"
    r"replace|values|table|use)\b", re.I)
SHELL_COMMANDS = frozenset("""
    ls cd pwd cat head tail find grep egrep fgrep rg sed awk cut sort uniq wc tr xargs echo printf
    mkdir rmdir rm cp mv ln touch chmod chown chgrp stat file du df tar gzip gunzip zip unzip bzip2
    xz md5sum sha1sum sha256sum diff cmp comm paste join tee basename dirname realpath readlink
    date env export set unset alias source which type whoami id hostname uname ps kill test true
    false git python python3 perl ruby node bash sh seq yes sleep nl od xxd hexdump strings base64
    rev tac fold fmt column split csplit expand unexpand iconv jq curl wget tree less more
    for while if case declare local read shopt cmp truncate mktemp install rsync patch sum cksum
    bc expr dd mount lsof nohup timeout watch history time nproc free top getent groups
""".split())
PROSE_HINT = re.compile(r"\b(I|I'm|I'll|I will|Let's|let me|we|you|should|would|could|the|this|that|here's|"
                        r"here is|to do|answer|sure|sorry)\b", re.I)
ACTION_MARK = re.compile(r"^[ \t>*_#]*action[ \t*_]*(?:\d+[ \t]*)?[:：][ \t*_]*", re.I | re.M)
THOUGHT_MARK = re.compile(r"^[ \t>*_#]*thought[ \t*_]*(?:\d+[ \t]*)?[:：][ \t*_]*", re.I | re.M)
SECTION_END = re.compile(r"^[ \t>*_#]*(thought|observation|reward|plan|step)[ \t*_]*\d*[ \t]*[:：]", re.I)
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<label>[^\n`]*)$", re.M)
INLINE = re.compile(r"^`([^`\n]+)`[.;]?$")
SUBMIT = re.compile(r"^[`*_\s]*submit(?:[ \t]+(?P<arg>[^\n]*?))?[`*_.\s]*$", re.I)


@dataclass
class Parsed:
    """A reply taken apart. ``ok`` False means: nothing to run, send the retry message."""

    action: str | None          # the code; None with ok=True means submit
    thought: str | None = None
    ok: bool = True
    how: str = ""               # fence | action | inline | bare | submit | none
    submit_arg: str | None = None

    @property
    def is_submit(self) -> bool:
        return self.ok and self.action is None


def retry_message(language: str, strategy: str = "tryagain") -> str:
    """What the model is told when its reply held no command (it never reaches the env)."""
    name, label = language_name(language), fence_label(language)
    if strategy == "react":
        form = f"Thought: <one or two sentences>\nAction: ```{label}\n<one {name} command>\n```"
    else:
        form = f"```{label}\n<one {name} command>\n```"
    return (f"[icplay] No {name} command was found in your last reply, so nothing was run. "
            f"Reply with exactly one {name} command in this form:\n{form}\n"
            "or with `submit` alone when you are done.")


def _fences(text: str) -> list[tuple[str, str, int, int]]:
    """(label, body, start, end) of each fenced block; an unclosed last fence runs to the end."""
    blocks = []
    pos = 0
    while True:
        m = FENCE.search(text, pos)
        if m is None:
            break
        fence, label = m.group("fence"), m.group("label").strip()
        body_start = m.end() + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        c = close.search(text, body_start) if body_start <= len(text) else None
        if c is None:
            blocks.append((label, text[body_start:], m.start(), len(text)))
            break
        blocks.append((label, text[body_start:c.start()], m.start(), c.end()))
        pos = c.end()
    return blocks


def _label_word(label: str) -> str:
    word = label.split()[0] if label.split() else ""
    return word.strip("{}.").lower()


def _clean_code(body: str, language: str) -> str:
    lines = body.strip("\n").splitlines()
    # a language name alone on the first line of an unlabelled fence
    if lines and lines[0].strip().lower() in _labels(language) and len(lines) > 1:
        lines = lines[1:]
    code = "\n".join(lines)
    code = _dedent(code)
    prompt = _pasted_prompt(code, language)
    if prompt is not None:
        code = "\n".join(line.lstrip()[len(prompt):] if line.strip() else line for line in code.splitlines())
    return code.strip()


PASTED_PROMPTS = ("$ ", "# ", "> ", "mysql> ", "sqlite> ", "MariaDB [(none)]> ", ">>> ")


def _pasted_prompt(code: str, language: str) -> str | None:
    """The prompt every non-blank line starts with, when the code was pasted from a terminal."""
    nonblank = [line for line in code.splitlines() if line.strip()]
    for prompt in PASTED_PROMPTS:
        if nonblank and all(line.lstrip().startswith(prompt) for line in nonblank):
            if prompt in ("# ", "> ") and language_prompts(language).bare_code != "shell":
                continue
            if prompt == "# ":   # shell comments, not root prompts, unless a command follows
                if not all(_first_word(line.lstrip()[2:]) in SHELL_COMMANDS for line in nonblank):
                    continue
            return prompt
    return None


def _dedent(code: str) -> str:
    lines = code.splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(line[cut:] for line in lines)


def _first_word(line: str) -> str:
    word = line.strip().split(maxsplit=1)[0] if line.strip() else ""
    return word.rstrip(";")


def _unquoted(text: str) -> str:
    """``text`` without its quoted literals (English inside a string is not prose)."""
    return re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "''", text)


def _prose_line(line: str) -> bool:
    """A line that reads as an English sentence rather than code."""
    s = line.strip()
    if SQL_START.match(s) or _first_word(s) in SHELL_COMMANDS:
        return False
    words = re.findall(r"[A-Za-z']+", s)
    return len(words) >= 3 and bool(PROSE_HINT.search(s)) and (s[0].isupper() or s.endswith((".", ":", "?", "!")))


def looks_like_code(text: str, language: str) -> bool:
    """A bare reply that is code and nothing else (used only when there is no fence)."""
    text = text.strip()
    if not text:
        return False
    lines = [line for line in text.splitlines() if line.strip()]
    bare = _unquoted(text)
    style = language_prompts(language).bare_code
    if style == "sql":
        return bool(SQL_START.match(text)) and not bare.rstrip().endswith((".", "?", "!", ":")) \
            and not PROSE_HINT.search(bare)
    if style == "shell":
        return len(lines) <= 3 and all(_shell_line(line) for line in lines)
    if style == "python":
        return _python_start(lines[0].lstrip())
    return False


def _python_start(first: str) -> bool:
    """A first line that starts Python code (a statement or an assignment), not a sentence."""
    return bool(re.match(r"(def|class|import|from|for|while|if|with|try|print\(|return|@)\b|[A-Za-z_]\w*\s*=[^=]",
                         first)) and not PROSE_HINT.match(first)


def _shell_line(line: str) -> bool:
    """A line of a bare shell reply: it starts with a command (or a path, variable, group)
    and does not read as English."""
    word = _first_word(line)
    if not (word in SHELL_COMMANDS or word.startswith(("./", "/", "~/", "$", "(", "{")) or "=" in word):
        return False
    plain = _unquoted(line)
    if PROSE_HINT.search(plain) and not re.search(r"[-/|<>$=*;&.~]", plain):
        return False      # "find the largest file": a command word, then English
    return not (plain.rstrip().endswith((".", ":", "?", "!")) and PROSE_HINT.search(plain))


def _submit(text: str) -> Parsed | None:
    m = SUBMIT.match(text.strip())
    if m is None:
        return None
    arg = (m.group("arg") or "").strip().strip("`").strip() or None
    return Parsed(None, how="submit", submit_arg=arg)


def _prose(text: str) -> str | None:
    text = THOUGHT_MARK.sub("", text).strip()
    return text or None


def _from_fences(text: str, language: str) -> tuple[str, int, int] | None:
    labels = _labels(language)
    for label, body, start, end in _fences(text):
        word = _label_word(label)
        if word and word not in labels:
            continue
        code = _clean_code(body, language)
        if code:
            return code, start, end
    return None


def _finish(code: str, thought: str | None, how: str, language: str) -> Parsed:
    sub = _submit(code)
    if sub is not None and (language_prompts(language).submit_arg or sub.submit_arg is None):
        sub.thought = thought
        return sub
    return Parsed(code, thought=thought, how=how)


ONE_LINE_FENCE = re.compile(r"^(?P<head>[^\n`]*?)(?P<fence>`{3,})[ \t]*(?P<body>[^`\n]+?)[ \t]*(?P=fence)[ \t]*$", re.M)


def _open_one_line_fences(text: str) -> str:
    """```sql SELECT 1``` on one line -> a fence of its own lines (label kept when it is one)."""
    def expand(m: re.Match) -> str:
        body = m.group("body")
        first, _, rest = body.partition(" ")
        known = _known_labels()
        label, code = (first, rest) if first.lower() in known and rest.strip() else ("", body)
        head = m.group("head")
        return f"{head}\n```{label}\n{code.strip()}\n```" if head.strip() else f"```{label}\n{code.strip()}\n```"
    return ONE_LINE_FENCE.sub(expand, text)


FENCE_MARK = re.compile(r"`{3,}|~{3,}")


def leaves_fence_open(text: str | None) -> bool:
    """Does the reply open a fence it never closes (a reply cut short: its block is not
    whole, so it is never run)? Fence marks are counted wherever they stand (``Action: ```sql``
    opens one mid-line): an odd count leaves one open."""
    return len(FENCE_MARK.findall(text or "")) % 2 == 1


def parse_reply(text: str | None, language: str) -> Parsed:
    """The action in ``text`` for an env of ``language`` (sql, bash, python, ctf)."""
    text = _open_one_line_fences((text or "").replace("\r\n", "\n").strip())
    if not text:
        return Parsed(None, ok=False, how="none")

    # 2. the strategy's "Action:" syntax (ReAct), when present, decides
    m = ACTION_MARK.search(text)
    if m is not None:
        return _after_action_mark(text[:m.start()], text[m.end():], language)

    # 1. a fenced block
    found = _from_fences(text, language)
    if found is not None:
        code, start, end = found
        thought = _prose((text[:start] + "\n" + text[end:]).strip())
        return _finish(code, thought, "fence", language)

    # submit alone
    sub = _submit(text)
    if sub is not None:
        return sub

    # 3. one inline code span
    spanned = _inline_span(text, language)
    if spanned is not None:
        return spanned

    # 4. a bare reply that is code and nothing else
    if looks_like_code(text, language):
        return _finish(text, None, "bare", language)
    return Parsed(None, thought=_prose(text), ok=False, how="none")


def _after_action_mark(head: str, tail: str, language: str) -> Parsed:
    """A reply with an "Action:" mark: a fence right after it, else the lines after it up to a
    blank line or the next section, else a fence further on."""
    thought = _prose(head)
    found = _from_fences(tail, language)
    if found is not None and not tail[:found[1]].strip():
        return _finish(found[0], thought, "action", language)
    inline = _action_lines(tail)
    if inline:
        sub = _submit(inline)
        if sub is not None:
            sub.thought = thought
            return sub
        # after an explicit Action: marker, one line of non-prose is taken as code
        if looks_like_code(inline, language) or ("\n" not in inline and not _prose_line(inline)):
            return _finish(inline, thought, "action", language)
    if found is not None:
        return _finish(found[0], thought, "action", language)
    return Parsed(None, thought=thought, ok=False, how="none")


def _action_lines(tail: str) -> str:
    """The text right after an "Action:" mark, up to a blank line or the next section (one
    inline code span taken out of its backticks)."""
    lines: list[str] = []
    for line in tail.splitlines():
        if (lines and not line.strip()) or SECTION_END.match(line):
            break
        lines.append(line)
    inline = "\n".join(lines).strip()
    im = INLINE.match(inline)
    return im.group(1).strip() if im else inline


def _inline_span(text: str, language: str) -> Parsed | None:
    """The code of a reply that is one inline code span (or, for SQL, prose around one span
    that is clearly a full statement); None otherwise."""
    im = INLINE.match(text)
    if im and looks_like_code(im.group(1), language):
        return _finish(im.group(1).strip(), None, "inline", language)
    spans = re.findall(r"`([^`\n]+)`", text)
    if len(spans) == 1 and looks_like_code(spans[0], language) and len(text) - len(spans[0]) < 200:
        thought = _prose(text.replace(f"`{spans[0]}`", "").strip())
        # prose around one span: accept only if the span is clearly a full statement
        if language_prompts(language).bare_code == "sql" and SQL_START.match(spans[0]) and len(spans[0].split()) >= 3:
            return _finish(spans[0].strip(), thought, "inline", language)
    return None
