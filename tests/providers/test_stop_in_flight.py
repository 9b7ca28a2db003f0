"""Stopping an environment while another thread waits on it (a run's Ctrl-C / SIGTERM
handler stops every environment while the episodes' threads are mid-request)."""

from __future__ import annotations

import os
import threading
import time

import pytest

pytestmark = pytest.mark.usefixtures("private_state_dir")


def test_a_request_in_flight_fails_at_once_when_another_thread_stops_the_environment(local_provider):
    """A request blocked on an environment that another thread stops must fail at once,
    never wait out its whole timeout, even when other threads open files meanwhile (the
    stopped client's socket fd number reused under the blocked read: a ready pool's
    thread starting the next environment during a SIGTERM kept `osguard run` alive for
    the action's timeout)."""
    env = local_provider.start()
    ended: dict[str, object] = {}

    def blocked() -> None:
        started = time.monotonic()
        try:
            env.run_bash("sleep 50", timeout=60)
            ended["how"] = "returned"
        except Exception as exc:  # what it raises is the client's business; that it ends is the point
            ended["how"] = type(exc).__name__
        ended["after_s"] = time.monotonic() - started

    thread = threading.Thread(target=blocked)
    thread.start()
    deadline = time.monotonic() + 30
    while "sleep 50" not in env.execute("ps -eo cmd", shell=True).output and time.monotonic() < deadline:
        time.sleep(0.05)
    opening = threading.Event()
    pipes: list[int] = []

    def open_files() -> None:  # takes every fd number freed while the environment stops
        while not opening.is_set() and len(pipes) < 400:
            pipes.extend(os.pipe())
            time.sleep(0.0005)

    opener = threading.Thread(target=open_files)
    opener.start()
    try:
        env.stop()
        thread.join(15)
    finally:
        opening.set()
        opener.join()
        for fd in pipes:
            os.close(fd)
    assert not thread.is_alive(), "the request in flight still waits on the stopped environment"
    assert ended["after_s"] < 15, ended
