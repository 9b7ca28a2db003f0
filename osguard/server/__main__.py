"""``python3 -m osguard.server``: run the OSWorld-protocol server.

Examples:
    python3 -m osguard.server --host 127.0.0.1 --port 5000
    python3 -m osguard.server --unix /run/osguard/server.sock
    python3 -m osguard.server --session --unix /run/osguard/server.sock   # with Xvfb + WM
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse flags and serve (or run the session keeper with ``--session``)."""
    parser = argparse.ArgumentParser(prog="python3 -m osguard.server",
                                     description="OSWorld-protocol server of an osguard environment.")
    parser.add_argument("--host", default="127.0.0.1", help="TCP address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5000, help="TCP port (default 5000, OSWorld's)")
    parser.add_argument("--unix", metavar="PATH", help="listen on a unix socket instead of TCP")
    parser.add_argument("--listen-fd", type=int, metavar="FD",
                        help="serve on an inherited listening unix socket instead (the local sandbox)")
    parser.add_argument("--session", action="store_true",
                        help="start Xvfb, D-Bus/AT-SPI and a window manager first and keep them alive")
    parser.add_argument("--headless", action="store_true", help="with --session: no display")
    parser.add_argument("--geometry", default="1920x1080", help="with --session: screen size WxH")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    parser.add_argument("--gate-fd", type=int, help=argparse.SUPPRESS)  # set by --session
    args = parser.parse_args(argv)
    if args.session:
        from osguard.server.session import run_session

        run_session(unix=args.unix, host=args.host, port=args.port, geometry=args.geometry,
                    headless=args.headless, verbose=args.verbose, listen_fd=args.listen_fd)
        return 0
    from osguard.server.app import serve

    serve(host=args.host, port=args.port, unix=args.unix, verbose=args.verbose, gate_fd=args.gate_fd,
          listen_fd=args.listen_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
