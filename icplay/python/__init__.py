"""Python (MBPP): a persistent interpreter inside the sandbox, and InterCode-Python's reward."""
