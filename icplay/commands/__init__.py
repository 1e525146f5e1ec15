"""One module per ``icplay`` subcommand; each defines ``register(subparsers)``.

``icplay --help`` imports every module here, so a command imports what it needs (models,
sandboxes, Textual) inside the function that runs it; that is the reason for the
function-local imports in this package, and each module says so once."""
