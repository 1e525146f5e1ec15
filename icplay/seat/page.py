"""The seat's pages, icplay's own rather than textual-serve's template: that one loads a font
from fonts.googleapis.com, which would tell a third party when each annotator works. This
page loads nothing but this server's files (textual-serve's script and xterm.js style), and
the headers say so to the browser (a Content-Security-Policy), forbid framing it into
another site, and keep the address out of any Referer.
"""

from __future__ import annotations

import html

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'self'; connect-src 'self'; img-src 'self' data:; "
                                "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; "
                                "form-action 'none'"),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}

_APP = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>{title}</title>
<link rel="stylesheet" href="{static}css/xterm.css">
<script src="{static}js/textual.js"></script>
<style>
  html, body {{ margin: 0; height: 100%; background: #0c181f; }}
  #terminal {{ position: absolute; inset: 0; }}
  .ended {{ display: none; position: absolute; inset: 0; z-index: 10; align-items: center; justify-content: center;
            color: #eee; font: 16px monospace; background: rgba(12, 24, 31, 0.9); }}
  body.-closed .ended {{ display: flex; }}
</style>
</head>
<body>
<div class="ended"><p>{title}: the session ended (its work is saved). Reload the page to start again.</p></div>
<div id="terminal" class="textual-terminal" data-session-websocket-url="{socket}" data-font-size="{font_size}"></div>
</body>
</html>
"""


def app_page(title: str, static_url: str, socket_url: str, font_size: int) -> str:
    """The terminal page: textual-serve's script connects to ``socket_url`` and draws the app."""
    return _APP.format(title=html.escape(title), static=html.escape(static_url), socket=html.escape(socket_url),
                       font_size=int(font_size))


def episode_list(title: str, supervisor: str, episodes: list[str], missing: str | None) -> str:
    """A supervisor's start page: the episodes they may follow (running ones first)."""
    from urllib.parse import urlencode

    rows = "".join(f'<li><a href="/?{html.escape(urlencode({"follow": name}))}">{html.escape(name)}</a></li>'
                   for name in episodes) or "<li>none yet</li>"
    note = f"<p>No episode {html.escape(missing)} here.</p>" if missing else ""
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)} · supervisor</title>"
            f"</head><body><h1>{html.escape(title)} · {html.escape(supervisor)} (supervisor, read-only)</h1>{note}"
            f"<p>Pick an episode to follow:</p><ul>{rows}</ul></body></html>")
