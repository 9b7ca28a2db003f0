"""osguard.server: an OSWorld-protocol HTTP server that runs inside an environment.

It answers the same endpoints, request and response shapes as OSWorld's in-VM Flask
server (``desktop_env/server/main.py``), so OSWorld's own ``PythonController`` and
``SetupController`` can drive an osguard environment unchanged. It is built for being
copied into sandboxes and images:

- it imports nothing else from osguard and only the standard library at import time
  (``http.server.ThreadingHTTPServer``); Pillow, python-xlib and pyatspi are optional and
  imported lazily by the endpoints that need them;
- run it as ``python3 -m osguard.server --host 127.0.0.1 --port 5000`` or
  ``--unix /run/osguard/server.sock``; ``--session`` also starts a private X display,
  a window manager and the AT-SPI bus first and keeps them (and the server) alive.
"""

from __future__ import annotations

from typing import Any

PROTOCOL_VERSION = 1


def __getattr__(name: str) -> Any:
    # Lazy: the session keeper imports this package too and must not pay for http.server.
    if name in ("make_server", "serve"):
        from osguard.server import app

        return getattr(app, name)
    raise AttributeError(f"module 'osguard.server' has no attribute {name!r}")


__all__ = ["PROTOCOL_VERSION", "make_server", "serve"]
