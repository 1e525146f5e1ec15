"""The browser seat: ``icplay serve`` runs icplay's own app for each annotator's browser.

textual-serve (``icplay.seat.server``) starts one app process per browser connection and
relays the terminal over a websocket to xterm.js in the page. It has no authentication of
its own, so every request passes ``icplay.seat.gate`` first: a token (``icplay.study.seats``)
opens exactly one seat, and the seat — never anything the browser sends — decides which
command runs (``icplay.seat.commands``); ``icplay.seat.relay`` decides what of the browser's
reaches that process, and what of the server's environment it inherits (``icplay.seat.environment``).
"""
