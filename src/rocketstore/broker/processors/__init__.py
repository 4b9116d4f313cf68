"""Request processors, one module per request group (``broker.router`` maps codes to them).

Layer: broker. Each processor is ``async (ctx, request, connection) -> response``, callable
directly in tests without sockets.
"""
