"""Background services. Each exposes ``run_once()`` for tests and ``start()``/``shutdown()``."""
