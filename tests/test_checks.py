"""The static checks hold: ruff's rules (pyproject's [tool.ruff.lint]) over the whole tree and
mypy over the files its [tool.mypy] lists, with no baseline of ignored errors (a narrow
``# noqa: CODE`` or ``# type: ignore[code]`` says why on its line)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from ci_rules import unavailable

if sys.version_info >= (3, 11):
    import tomllib
else:   # icplay's own dependency on Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def tool(name: str) -> str:
    found = Path(sys.executable).parent / name
    if found.exists():
        return str(found)
    which = shutil.which(name)
    if which is None:
        unavailable(f"{name} is not installed (pip install -e '.[dev]')")
    return str(which)


def test_ruff_finds_nothing():
    done = subprocess.run([tool("ruff"), "check", "--no-cache", "icplay", "tests", "bench"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_catches_a_mistake(tmp_path):
    """The configured rules do fire: an undefined name and a bare lambda assignment."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "mistake.py").write_text("def f():\n    return undefined_name\n\n\ng = lambda: 1\n")
    done = subprocess.run([tool("ruff"), "check", "--no-cache", "--output-format", "concise", "mistake.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "F821" in done.stdout and "E731" in done.stdout


def test_mypy_finds_nothing():
    """pyproject's [tool.mypy]: the core layers strict, the rest listed there with check_untyped_defs.
    The checkout's own .mypy_cache is kept from run to run (mypy checks a cache entry against its
    source, so a stale one costs time, never a finding): a second run takes seconds, not minutes."""
    done = subprocess.run([tool("mypy"), "--cache-dir", str(ROOT / ".mypy_cache")], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success" in done.stdout


MAX_FUNCTION_LINES = 60   # issue 21: no function over 60 lines


def long_functions(root: Path) -> list[str]:
    """Every function (or method) under ``root`` longer than MAX_FUNCTION_LINES, docstring included."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_over_60_lines():
    assert long_functions(ROOT / "icplay") == []


def test_a_long_function_is_caught(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (package / "long.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}")
    assert long_functions(package) == [f"pkg/long.py:5 long ({MAX_FUNCTION_LINES + 1} lines)"]


MAX_COMPLEX_PER_1000_LINES = 2.0   # issue 21: radon's C-or-worse blocks, at most 2 per 1 000 lines


def complex_blocks(root: Path) -> tuple[list[str], int]:
    """The blocks under ``root`` that radon rates C or worse (as ``radon cc -n C`` lists them),
    and the lines they are counted against (radon's LOC, as ``radon raw`` totals them)."""
    from radon.complexity import cc_rank, cc_visit  # dev-only dependency: the test alone needs it
    from radon.raw import analyze

    found, lines = [], 0
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines += analyze(source).loc
        for block in cc_visit(source):
            if cc_rank(block.complexity) >= "C":
                found.append(f"{path.relative_to(root.parent)}:{block.lineno} {block.fullname} "
                             f"({cc_rank(block.complexity)} {block.complexity})")
    return found, lines


def test_few_blocks_are_complex():
    found, lines = complex_blocks(ROOT / "icplay")
    per_1000 = 1000 * len(found) / lines
    assert per_1000 <= MAX_COMPLEX_PER_1000_LINES, (
        f"{len(found)} blocks rated C or worse in {lines} lines ({per_1000:.2f} per 1 000):\n"
        + "\n".join(sorted(found)))


def test_a_complex_function_is_caught(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(11))
    (package / "tangled.py").write_text(f"def simple(x):\n    return x\n\n\ndef tangled(x):\n{branches}    return -1\n")
    found, lines = complex_blocks(package)
    assert found == ["pkg/tangled.py:5 tangled (C 12)"]
    assert lines == 2 + 2 + 1 + 22 + 1


# Why a function may import one of icplay's own modules inside it (docs/library.md, "Checks"):
# the words its comment must use, on the import's line or on a comment line just above it, or
# once for the whole module in a comment that says its imports are "imported inside the function".
LOCAL_IMPORT_REASONS = ("start-up", "start fast", "optional dependency", "import cycle")
MODULE_WIDE = "imported inside the function"
NOT_YET_AUDITED: set[str] = set()   # modules whose local imports wait for an audit (none now)


def unexplained_local_imports(root: Path) -> list[str]:
    """Every import of ``root``'s own package inside a function with no comment saying why."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = str(path.relative_to(root.parent))
        if name in NOT_YET_AUDITED:
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        module_wide = any(line.startswith("#") and MODULE_WIDE in line + " " + lines[i + 1]
                          and any(r in line + " " + lines[i + 1] for r in LOCAL_IMPORT_REASONS)
                          for i, line in enumerate(lines[:-1]))
        for function in ast.walk(ast.parse(source)):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if getattr(node, "level", 0) or not any(m.split(".")[0] == root.name for m in modules):
                    continue
                said = lines[node.lineno - 1] + " " + (lines[node.lineno - 2] if node.lineno > 1 else "")
                if not module_wide and not any(r in said for r in LOCAL_IMPORT_REASONS):
                    found.append(f"{name}:{node.lineno} {lines[node.lineno - 1].strip()}")
    return found


def test_function_local_imports_say_why():
    assert unexplained_local_imports(ROOT / "icplay") == []


def test_an_unexplained_local_import_is_caught(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "said.py").write_text("def f():\n    from pkg import other   # start-up: other is slow\n"
                                     "    return other\n\n\ndef g():\n    import json\n    return json\n")
    (package / "unsaid.py").write_text("def f():\n    from pkg.said import f\n    return f\n")
    (package / "wide.py").write_text("# Commands are imported inside the function that runs them: start-up.\n\n"
                                     "def f():\n    from pkg.said import f\n    return f\n")
    assert unexplained_local_imports(package) == ["pkg/unsaid.py:2 from pkg.said import f"]


def test_mypy_lists_every_module():
    """Every package and top-level module of icplay is in [tool.mypy]'s files (none left out
    quietly: a module not listed would go unchecked)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"])
    package = ROOT / "icplay"
    present = {f"icplay/{p.name}" for p in package.iterdir()
               if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists())}
    assert present - listed == set()


# Where Textual reads a plain str as markup (issue 28): a widget's content, a border title, a
# table cell, an option, a tree node, a notification (unless ``markup=False``), the exit message
MARKUP_CALLS = {"Static", "Label", "Button", "Option", "update", "add_row", "add", "add_leaf", "add_option"}
MARKUP_ATTRIBUTES = {"border_title", "border_subtitle"}


def _literal(node: ast.AST) -> bool:
    """Whether ``node`` is made of string literals only (a choice or a sum of them)."""
    if isinstance(node, ast.IfExp):
        return _literal(node.body) and _literal(node.orelse)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) and _literal(node.right)
    return isinstance(node, ast.Constant)


def _built_str(node: ast.AST) -> bool:
    """Whether ``node`` builds a str from values at run time: an f-string with a field, a
    sum or choice with something not a literal, str()/repr()/format()/join() of something."""
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _built_str(node.body) or _built_str(node.orelse)
    if isinstance(node, ast.BinOp):    # a sum with a str in it, not all literals
        return not _literal(node) and any(isinstance(side, (ast.Constant, ast.JoinedStr)) or _built_str(side)
                                          for side in (node.left, node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr", "format"):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "join")


def by_place(found: list[str]) -> list[str]:
    """Findings ``path:line what`` in the order of the files and their lines."""
    return sorted(found, key=lambda line: (line.split(":")[0], int(line.split(":")[1].split()[0]), line))


def markup_from_values(root: Path) -> list[str]:
    """Every place under ``root`` that hands Textual a str built from values where it reads
    markup: such text goes as Text (``icplay.tui.shown``) or with ``markup=False``. (A str held
    in a variable is not seen here: the Pilot tests in tests/hostile/display/test_display_hostile.py
    drive those surfaces with hostile text.)"""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr in MARKUP_ATTRIBUTES
                                                    for t in node.targets) and _built_str(node.value):
                found.append(f"{where} border title")
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            keywords = {k.arg: k.value for k in node.keywords}
            if name == "notify":
                plain = isinstance(keywords.get("markup"), ast.Constant) and keywords["markup"].value is False
                if node.args and not plain and not _literal(node.args[0]):
                    found.append(f"{where} notify without markup=False")
            elif name == "exit" and "message" in keywords and _built_str(keywords["message"]):
                found.append(f"{where} exit message")
            elif name in MARKUP_CALLS and any(_built_str(arg) for arg in node.args):
                found.append(f"{where} {name}")
    return by_place(found)


def test_no_widget_gets_markup_built_from_values():
    assert markup_from_values(ROOT / "icplay" / "tui") == []


def test_markup_built_from_values_is_caught(tmp_path):
    package = tmp_path / "tui"
    package.mkdir()
    (package / "screen.py").write_text(
        "def show(self, cwd, exc, task):\n"
        "    self.label.update(f'{cwd}$')\n"
        "    self.notify(str(exc))\n"
        "    self.table.border_title = 'Task ' + task.id\n"
        "    self.table.add_row(task.id, str(task.level))\n"
        "    self.notify(str(exc), markup=False)\n"
        "    self.label.update(Text(f'{cwd}$'))\n"
        "    self.notify('Saved.')\n")
    assert markup_from_values(package) == ["tui/screen.py:2 update", "tui/screen.py:3 notify without markup=False",
                                           "tui/screen.py:4 border title", "tui/screen.py:5 add_row"]


# Issue 31: the driver is the loop every front end runs on, not a front end itself. It does no
# terminal I/O (line mode is icplay/lines, beside the TUI) and names no language and no key of
# one language's reward (what differs by language is asked of its spec, icplay/languages).
TERMINAL_CALLS = {"print", "input", "breakpoint"}
TERMINAL_STREAMS = {"stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__"}
TERMINAL_MODULES = {"tty", "termios", "curses", "readline", "getpass", "pty"}
LANGUAGE_NAMES = {"bash", "sql", "python", "ctf", "mysql", "sqlite"}
# the keys that only one language's reward breakdown has (Bash's parts, SQL's measures, Python's binding)
REWARD_KEYS = {"p1", "p2", "p3", "cosine", "different_content", "iou", "kendall_tau_b", "rows_matched",
               "gold_function"}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of ``tree``'s module, classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _terminal_use(node: ast.AST) -> str | None:
    """What terminal I/O ``node`` is, if it is some."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TERMINAL_CALLS:
        return f"{node.func.id}()"
    if isinstance(node, ast.Attribute) and node.attr == "isatty":
        return "isatty"
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys"
            and node.attr in TERMINAL_STREAMS):
        return f"sys.{node.attr}"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        hit = [n for n in names if n.split(".")[0] in TERMINAL_MODULES]
        return f"import {hit[0]}" if hit else None
    return None


def front_end_in(root: Path) -> list[str]:
    """Every place under ``root`` that does terminal I/O, or names a language or a key of one
    language's reward in a string literal (docstrings aside)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 0)}"
            use = _terminal_use(node)
            if use is not None:
                found.append(f"{where} terminal I/O: {use}")
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and node.value.lower() in LANGUAGE_NAMES | REWARD_KEYS):
                found.append(f"{where} names {node.value!r}")
    return by_place(found)


def test_the_driver_is_no_front_end():
    assert front_end_in(ROOT / "icplay" / "driver") == []


def test_a_front_end_in_the_driver_is_caught(tmp_path):
    package = tmp_path / "driver"
    package.mkdir()
    (package / "loop.py").write_text(
        '"""The loop, for bash and sql alike (a docstring may say so)."""\n'
        "import sys\nimport termios\n\n\n"
        "def show(env, b, write=print):\n"
        "    print(b)\n"
        "    line = input('> ')\n"
        "    sys.stdout.write(line)\n"
        "    if env.name in ('bash', 'sql'):\n"
        "        return b['p1'] + b.get('IOU', 0)\n"
        "    return sys.stdin.isatty()\n")
    assert front_end_in(package) == [
        "driver/loop.py:3 terminal I/O: import termios", "driver/loop.py:7 terminal I/O: print()",
        "driver/loop.py:8 terminal I/O: input()", "driver/loop.py:9 terminal I/O: sys.stdout",
        "driver/loop.py:10 names 'bash'", "driver/loop.py:10 names 'sql'", "driver/loop.py:11 names 'IOU'",
        "driver/loop.py:11 names 'p1'", "driver/loop.py:12 terminal I/O: isatty",
        "driver/loop.py:12 terminal I/O: sys.stdin"]


MAX_CLASS_LINES = 400   # issue 31: a class you can read in one sitting


def long_classes(root: Path) -> list[str]:
    """Every class under ``root`` longer than MAX_CLASS_LINES."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} "
                             f"({node.end_lineno - node.lineno + 1} lines)")
    return found


def test_no_class_is_over_400_lines():
    assert long_classes(ROOT / "icplay") == []


def test_a_long_class_is_caught(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_CLASS_LINES))
    (package / "big.py").write_text(f"class Small:\n    x = 1\n\n\nclass Big:\n{body}")
    assert long_classes(package) == [f"pkg/big.py:5 Big ({MAX_CLASS_LINES + 1} lines)"]


def test_vulture_finds_no_dead_code():
    """pyproject's [tool.vulture]: icplay/ with ci/vulture_whitelist.py, where each name used out
    of vulture's sight says where it is used."""
    done = subprocess.run([tool("vulture")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stderr[-2000:]     # 3: dead code found
    assert done.stdout.splitlines() == []


def test_vulture_catches_dead_code(tmp_path):
    (tmp_path / "pkg.py").write_text("def used():\n    return 1\n\n\ndef dead():\n    return used()\n")
    done = subprocess.run([tool("vulture"), "--min-confidence", "60", "pkg.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3 and "unused function 'dead'" in done.stdout


BROAD = {"Exception", "BaseException"}


def _broad(handler: ast.ExceptHandler) -> bool:
    """A bare ``except:``, or one naming Exception or BaseException (alone or in a tuple)."""
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(isinstance(k, ast.Name) and k.id in BROAD for k in kinds)


def unexplained_broad_excepts(root: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Every handler under ``root`` that catches everything with no comment on its ``except``
    line saying why here (the failure it stands for, and why it is not raised on)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = str(path.relative_to(root.parent))
        if name.startswith(skip):
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ExceptHandler) and _broad(node):
                line = lines[node.lineno - 1]
                comment = line.split("#", 1)[1] if "#" in line else ""
                if len(comment.split()) < 3:      # a reason, not a word or two
                    found.append(f"{name}:{node.lineno} {line.strip()}")
    return found


def test_every_broad_except_says_why():
    """issue 31: a handler names the failures it handles; one that must catch everything (a
    worker thread, a plug-in's code, a server's 500) says why on its line."""
    assert unexplained_broad_excepts(ROOT / "icplay") == []


def test_an_unexplained_broad_except_is_caught(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        "def f(g):\n"
        "    try:\n        g()\n    except Exception:\n        pass\n"
        "    try:\n        g()\n    except:  # fine\n        pass\n"
        "    try:\n        g()\n    except (OSError, BaseException):\n        raise\n"
        "    try:\n        g()\n    except Exception:   # a plug-in's code: said, the others go on\n        pass\n"
        "    try:\n        g()\n    except OSError:\n        pass\n")
    assert unexplained_broad_excepts(package) == ["pkg/m.py:4 except Exception:", "pkg/m.py:8 except:  # fine",
                                                  "pkg/m.py:12 except (OSError, BaseException):"]


# Issue 31: replays are policies on the driver. Only the driver (icplay/driver, and the
# Episode it steps through: icplay/episode.py) steps or scores an env; besides it, the env and
# sandbox layers themselves (an env wrapping another, InterCode's semantics, a gold check
# inside the SQL env) and the doors for external callers, whose caller is the policy: gym,
# aio, compat, serve, trl (they run on icplay/driver/external.py or wrap an env for a caller
# who steps it).
ENV_CALLS = {"step", "submit", "score"}
STEPPING_ALLOWED = ("icplay/driver/", "icplay/episode.py", "icplay/envs/", "icplay/sandbox/", "icplay/bash/compat.py",
                    "icplay/gym/", "icplay/aio.py", "icplay/compat/", "icplay/serve/", "icplay/trl.py")


def _is_env(node: ast.AST) -> bool:
    """Whether a call's receiver is an env by its name: ``env``, ``self.env``, ``lease.env``,
    ``fresh_env``, ``self._env()``."""
    text = ast.unparse(node.func if isinstance(node, ast.Call) else node)
    last = text.rsplit(".", 1)[-1].lstrip("_")
    return last == "env" or last.endswith("_env")


def env_stepping(root: Path, allowed: tuple[str, ...] = STEPPING_ALLOWED) -> list[str]:
    """Every ``<env>.step(...)`` / ``.submit(...)`` / ``.score(...)`` under ``root`` outside ``allowed``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        if any(name == a or name.startswith(a) for a in allowed):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ENV_CALLS
                    and _is_env(node.func.value)):
                found.append(f"{name}:{node.lineno} {ast.unparse(node.func)}")
    return found


def test_only_the_driver_steps_an_env():
    assert env_stepping(ROOT / "icplay") == []


def test_an_env_stepped_outside_the_driver_is_caught(tmp_path):
    package = tmp_path / "icplay"
    (package / "driver").mkdir(parents=True)
    (package / "driver" / "loop.py").write_text("def run(env):\n    return env.step('ls')\n")
    (package / "replays.py").write_text("def again(self, env, driver):\n    driver.step()\n    env.step('ls')\n"
                                        "    self.env.submit()\n    return self.sql_env.score()\n")
    assert env_stepping(package) == ["icplay/replays.py:3 env.step", "icplay/replays.py:4 self.env.submit",
                                     "icplay/replays.py:5 self.sql_env.score"]


# Issue 31: what differs by language is a capability of its spec; no front end compares a
# language's name. A front end may not compare a name literal with an env or language
# (``task.env == "sql"``, ``env not in ("bash", "sql")``) nor keep a table of languages (a
# tuple or dict literal naming two or more). Allowed, and why:
FRONT_ENDS = ("tui", "commands", "frontend", "seat", "study", "scan", "report.py", "review")
LANGUAGE_NAMES = {"bash", "sql", "python", "ctf", "harbor"}
LANGUAGE_TABLES_ALLOWED = {
    # the titles of the key scopes (``LanguageSpec.keys_scope``: the key table a pane's input
    # uses), looked up by scope for the keys screen: never compared with a task's language
    "icplay/tui/screens/modals.py:SCOPE_TITLES",
    # the input widget of each key scope (``LanguageSpec.keys_scope``), looked up by the
    # scope of the spec's pane: likewise never compared with a task's language
    "icplay/tui/app.py:INPUT_WIDGETS",
}


def _names_language(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in LANGUAGE_NAMES


def _language_literals(node: ast.AST) -> int:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return sum(_names_language(e) for e in node.elts)
    return int(_names_language(node))


def _about_language(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return any(word in text for word in ("env", "language", "lang"))


def language_comparisons(root: Path, parts: tuple[str, ...] = FRONT_ENDS) -> list[str]:
    """Every comparison of a language-name literal with an env or language, and every table of
    language names, in ``root``'s front ends."""
    found = []
    for part in parts:
        paths = [root / part] if part.endswith(".py") else sorted((root / part).rglob("*.py"))
        for path in paths:
            name = path.relative_to(root.parent).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            assigned = {id(n.value): t.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
                        for t in n.targets if isinstance(t, ast.Name)}
            for node in sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")), key=lambda n: n.lineno):
                if isinstance(node, ast.Compare):
                    sides = [node.left, *node.comparators]
                    if any(_language_literals(s) for s in sides) and any(_about_language(s) for s in sides
                                                                         if not _language_literals(s)):
                        found.append(f"{name}:{node.lineno} {ast.unparse(node)}")
                elif (isinstance(node, ast.Dict) and sum(_names_language(k) for k in node.keys) >= 2
                      or isinstance(node, (ast.Tuple, ast.List, ast.Set)) and _language_literals(node) >= 2):
                    if f"{name}:{assigned.get(id(node))}" not in LANGUAGE_TABLES_ALLOWED:
                        found.append(f"{name}:{node.lineno} {ast.unparse(node)[:60]}")
    return found


def test_no_front_end_compares_a_language_name():
    assert language_comparisons(ROOT / "icplay") == []


def test_a_language_name_in_a_front_end_is_caught(tmp_path):
    package = tmp_path / "icplay"
    (package / "tui").mkdir(parents=True)
    (package / "tui" / "screen.py").write_text(
        "def show(task, spec, args):\n    if task.env == 'sql':\n        return 1\n"
        "    if spec.forks or args.format == 'harbor':\n        return 2\n"
        "    return {'python': 1, 'ctf': 2}.get(task.env)\n\n\nCHOICES = ('sql', 'bash')\n")
    assert language_comparisons(package, ("tui",)) == [
        "icplay/tui/screen.py:2 task.env == 'sql'", "icplay/tui/screen.py:6 {'python': 1, 'ctf': 2}",
        "icplay/tui/screen.py:9 ('sql', 'bash')"]
