"""Forwarding the host's loopback to an environment's unix socket, for its owner only.

Standard library only, and self-contained: the local supervisor imports it, and the
docker provider runs this very file's source as the forwarder container's program
(``python3 -S -c SOURCE PORT SOCKET UID...``), so the two forwarders apply the same rule.

The rule: a TCP connection on 127.0.0.1 is served only when the socket at its other end
belongs to an allowed uid (the environment's owner, and root). The kernel's own table
(``/proc/net/tcp`` of this network namespace) says who owns it, the TCP counterpart of
``SO_PEERCRED``: a client cannot forge it, and OSWorld's clients need nothing new.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time

CONNECT_RETRY_SECONDS = 30.0  # how long a client connection waits for the server socket


def hex_address(address: tuple[str, int]) -> str:
    """An IPv4 (host, port) as /proc/net/tcp writes it (the address in host byte order)."""
    packed = struct.unpack("=I", socket.inet_aton(address[0]))[0]
    return f"{packed:08X}:{address[1]:04X}"


def peer_uid(peer: tuple[str, int], port: int) -> int | None:
    """The uid owning the client end of a loopback connection to our ``port`` on
    127.0.0.1 (None when the kernel no longer lists it)."""
    local, remote = hex_address(peer), hex_address(("127.0.0.1", port))
    try:
        with open("/proc/net/tcp", encoding="ascii") as table:
            next(table, None)
            for line in table:
                fields = line.split()
                if len(fields) > 7 and fields[1] == local and fields[2] == remote:
                    return int(fields[7])
    except (OSError, ValueError):
        pass
    return None


def pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until EOF, then half-close both."""
    try:
        while True:
            data = source.recv(262144)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass
        try:
            source.close()
        except OSError:
            pass


def relay(client: socket.socket, socket_path: str, ending: threading.Event | None = None) -> None:
    """Connect to ``socket_path`` (retrying while the server starts) and relay both ways."""
    deadline = time.monotonic() + CONNECT_RETRY_SECONDS
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            upstream.connect(socket_path)
            break
        except OSError:
            if (ending is not None and ending.is_set()) or time.monotonic() > deadline:
                upstream.close()
                client.close()
                return
            time.sleep(0.005)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
    pump(client, upstream)


def serve(listener: socket.socket, socket_path: str, allowed: set[int],
          ending: threading.Event | None = None) -> None:
    """Accept on ``listener`` (bound to 127.0.0.1) and relay the allowed uids' connections;
    close everyone else's unanswered."""
    port = listener.getsockname()[1]
    while ending is None or not ending.is_set():
        try:
            client, peer = listener.accept()
        except OSError:
            if ending is not None and ending.is_set():
                return
            time.sleep(0.05)
            continue
        if peer_uid(peer, port) not in allowed:
            client.close()
            continue
        threading.Thread(target=relay, args=(client, socket_path, ending), daemon=True).start()


def main(argv: list[str]) -> int:
    """``PORT SOCKET_PATH UID...``: the docker provider's forwarder container."""
    port, socket_path, uids = int(argv[0]), argv[1], {int(uid) for uid in argv[2:]}
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    serve(listener, socket_path, uids)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
