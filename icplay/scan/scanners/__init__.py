"""icplay's own scanners, one module per group of flags (``icplay.scan.registry.BUILTIN``)."""
