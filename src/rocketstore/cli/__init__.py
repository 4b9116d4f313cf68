"""The ``rocketstore`` command line (top layer; one module per command group)."""
