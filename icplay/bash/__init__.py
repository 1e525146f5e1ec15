"""Bash specifics that are not the environment itself: InterCode's NL2Bash images and
InterCode's execution semantics (``--compat intercode``)."""
