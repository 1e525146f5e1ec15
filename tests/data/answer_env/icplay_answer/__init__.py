"""An example icplay environment in one small package (see icplay's docs/own-env.md)."""
