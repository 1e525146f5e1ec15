"""Drop-in replacements for other projects' Python APIs (``icplay.compat.intercode``)."""
