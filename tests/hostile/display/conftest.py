"""The display's hostile tests (issue 28) drive the TUI: the playground tests' fixtures
(tests/tui/tui_helpers.py) are theirs too."""

from tui_helpers import home, make_app, shop_catalog, sql_ready  # noqa: F401
