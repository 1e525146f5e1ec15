"""The import-linter contracts of pyproject.toml hold (layers; only icplay.tui imports
textual), they see every module (a folder without ``__init__.py`` is invisible to
import-linter, a module in no layer is unchecked), and they do catch a break."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_rules import unavailable

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def lint_imports() -> str:
    found = Path(sys.executable).parent / "lint-imports"
    if not found.exists():
        found = shutil.which("lint-imports")
        if found is None:
            unavailable("import-linter is not installed (pip install -e '.[dev]')")
    return str(found)


def run(tool: str, cwd: Path) -> subprocess.CompletedProcess:
    # cwd first on sys.path, so the icplay of that folder is the one analysed
    return subprocess.run([tool, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_contracts_are_kept():
    done = run(lint_imports(), ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("module, line, broken", [
    ("icplay/envs/base.py", "import textual", "Only icplay.tui imports textual"),
    ("icplay/sandbox/base.py", "import icplay.envs", "icplay.sandbox is not allowed to import icplay.envs"),
    ("icplay/formats/intercode.py", "import icplay.rescore",
     "icplay.formats.intercode is not allowed to import icplay.rescore"),
    ("icplay/python/reward.py", "import icplay.envs.base", "icplay.python is not allowed to import icplay.envs"),
    # the screens and widgets, once invisible to import-linter (no __init__.py)
    ("icplay/tui/screens/live.py", "import icplay.commands.watch",
     "icplay.tui is not allowed to import icplay.commands"),
    ("icplay/tui/widgets/panes.py", "import icplay.cli", "icplay.tui is not allowed to import icplay.cli"),
    ("icplay/bash/compat.py", "import icplay.episode", "icplay.bash.compat is not allowed to import icplay.episode"),
    # line mode is a front end beside the TUI, not part of the driver (issue 31)
    ("icplay/driver/driver.py", "import icplay.lines", "icplay.driver is not allowed to import icplay.lines"),
    ("icplay/lines/loop.py", "import icplay.tui.shown", "icplay.lines is not allowed to import icplay.tui"),
    ("icplay/tui/shown.py", "import icplay.lines", "icplay.tui is not allowed to import icplay.lines"),
])
def test_a_break_is_caught(tmp_path, module, line, broken):
    tool = lint_imports()
    shutil.copytree(ROOT / "icplay", tmp_path / "icplay", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / module, "a") as handle:
        handle.write(f"\n{line}  # a layering mistake\n")
    done = run(tool, tmp_path)
    assert done.returncode != 0
    assert broken in done.stdout.replace("\n", " ") or broken in done.stdout


def modules() -> list[str]:
    """Every module of icplay by its dotted name (packages by their own name)."""
    found = []
    for path in sorted((ROOT / "icplay").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_folder_of_code_is_a_package():
    missing = sorted(str(d.relative_to(ROOT)) for d in (ROOT / "icplay").rglob("*")
                     if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
                     and not (d / "__init__.py").exists())
    assert missing == [], f"folders of code that import-linter cannot see (no __init__.py): {missing}"


def test_every_module_is_in_a_layer():
    """A module in no layer may import anything; a new package must be placed (pyproject)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    placed = [name.strip() for layer in layers for name in layer.replace(":", "|").split("|")]
    unplaced = []
    for module in modules():
        inside = any(module == p or module.startswith(p + ".") for p in placed)
        # a package whose children are placed one by one (icplay, icplay.formats) is only its __init__
        holder = any(p.startswith(module + ".") for p in placed)
        if not inside and not holder:
            unplaced.append(module)
    assert unplaced == [], f"modules in no layer of pyproject's [tool.importlinter]: {unplaced}"


def test_the_architecture_page_names_every_room():
    """docs/architecture.md gives each top-level package and module of icplay its paragraph:
    a room added without one is a room a newcomer cannot find."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    rooms = sorted({path.relative_to(ROOT / "icplay").parts[0].removesuffix(".py")
                    for path in (ROOT / "icplay").glob("*") if path.suffix == ".py" or (path / "__init__.py").exists()}
                   - {"__init__", "__main__"})
    unnamed = [room for room in rooms if f"**{room}**" not in page]
    assert unnamed == [], f"docs/architecture.md does not name these rooms of icplay: {unnamed}"
