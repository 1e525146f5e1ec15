"""Registers the playground tests' fixtures (they live in tui_helpers.py with the helpers)."""

from tui_helpers import frozen_app, home, make_app, shop_catalog, sql_ready  # noqa: F401
