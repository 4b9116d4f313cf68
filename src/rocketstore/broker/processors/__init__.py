"""Request processors, one module per request group; :func:`build_router` maps codes.

Layer: broker. Each processor is ``async (ctx, request, connection) -> response``, callable
directly in tests without sockets.
"""
