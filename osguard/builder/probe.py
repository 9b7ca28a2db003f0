"""State probes: what the invariants and osguard-kind success checks look at.

A probe is one self-contained Python script (``osguard/builder/_probe_script.py``, standard
library plus ``xxhash`` when present). Where the provider offers a trusted view
(``osguard.providers.view``: local, docker) its logic runs on the host over the
environment's files; only on an OSWorld VM does it run inside through ``env.run_python``.
It collects the State of the roots a variant names: per path the type,
mode, owner, size, symlink target and content hash (xxh3-128, or a hashlib algorithm named
in ``State["hash_algo"]`` where xxhash is absent, as in the OSWorld VM), structured reads of
config files, the files that contain each distinctive token, command outputs, processes and
the clipboard. ``~`` is expanded inside the environment; every path in the State is absolute.

``probe_local`` runs the same script in a subprocess on this machine (tests, benches).

``ProbeRequest.extra`` keys the script understands: ``hash_algo`` (force a hashlib name,
e.g. ``"sha256"``, for comparing with a state taken where xxhash is absent) and ``exclude``
(paths not to descend into).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import zlib
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osguard.errors import EnvironmentError_
from osguard.invariants.types import ProbeRequest, State

if TYPE_CHECKING:
    from osguard.providers.base import Environment

__all__ = ["MARKER", "ProbeError", "parse_probe_output", "probe", "probe_code", "probe_inside", "probe_local",
           "request_to_json"]

MARKER = "@@OSGUARD_PROBE@@"
_SCRIPT_PATH = Path(__file__).with_name("_probe_script.py")


class ProbeError(EnvironmentError_):
    """Raised when the probe script could not run in the environment or printed no State."""


@lru_cache(maxsize=1)
def _script_source() -> str:
    return _SCRIPT_PATH.read_text(encoding="utf-8")


def request_to_json(request: ProbeRequest) -> dict[str, Any]:
    """The JSON form of a request, as embedded in the probe script."""
    data = asdict(request)
    data["configs"] = [list(pair) for pair in request.configs]
    return data


def probe_code(request: ProbeRequest) -> str:
    """The complete program sent to the environment: the script plus a call with the request.

    The request travels compressed and base64-encoded: no path can break out of the
    literal, and no form of a token (verbatim, base64...) appears in the script file the
    environment writes to /tmp (the token search would find the probe itself).
    """
    # zlib first: the base64 of plain JSON would carry the base64 form of every token, which
    # not_disclosed searches for (the probe would find its own script in /tmp)
    payload = base64.b64encode(zlib.compress(json.dumps(request_to_json(request)).encode())).decode()
    return (f"{_script_source()}\n\nmain(json.loads(__import__('zlib').decompress("
            f"__import__('base64').b64decode('{payload}')).decode()))\n")


def parse_probe_output(stdout: str, *, where: str = "environment") -> State:
    """Extract the State from the probe's stdout (the last marker line wins).

    Raises:
        ProbeError: when no State line is present or it is not valid JSON.
    """
    position = stdout.rfind(MARKER)
    if position < 0:
        tail = stdout.strip()[-500:]
        raise ProbeError(f"probe in {where} printed no state (expected a line starting {MARKER}); output: {tail!r}")
    line = stdout[position + len(MARKER):].split("\n", 1)[0]
    try:
        state = json.loads(line)
    except ValueError as exc:
        raise ProbeError(f"probe in {where} printed malformed state JSON: {exc}") from None
    if not isinstance(state, dict) or "files" not in state:
        raise ProbeError(f"probe in {where} printed JSON that is not a State")
    return state


def probe(env: "Environment", request: ProbeRequest, *, timeout: float = 60) -> State:
    """Probe an environment's state, from outside it wherever the provider allows.

    With a trusted view (``env.trusted_view()``: the local sandbox's host side, the Docker
    engine) the State is read without running anything the agent could alter; otherwise
    (an OSWorld VM) the script runs inside through ``env.run_python`` and the State says
    ``"trusted": false``. See ``osguard.providers.view`` and docs/invariants.md.

    Args:
        env: a started environment.
        request: what to collect (see ``osguard.invariants.probe_request_for``).
        timeout: seconds allowed.

    Returns:
        The State (see ``osguard.invariants.types``), with ``trusted``, ``view`` and
        ``inside_errors``.

    Raises:
        ProbeError: when the probe failed (osguard's own failure).
        osguard.errors.EnvironmentDead: when an inside-only environment stopped answering.
    """
    from osguard.providers.view import trusted_view_of

    view = trusted_view_of(env)
    if view is not None:
        return view.probe(request, timeout=timeout)
    state = probe_inside(env, request, timeout=timeout)
    state["trusted"] = False
    state["view"] = "inside"
    state["inside_errors"] = {}
    if getattr(request, "watch", ()):
        state["accesses"] = {}
        state["accesses_error"] = "no access watcher: this provider offers no view from outside the environment"
    return state


def probe_inside(env: "Environment", request: ProbeRequest, *, timeout: float = 60) -> State:
    """Run the probe script inside the environment through ``env.run_python`` (untrusted:
    the agent controls that interpreter, its site-packages and its output).

    Raises:
        ProbeError: when the script failed or printed no State.
        osguard.errors.EnvironmentDead: when the environment stopped answering.
    """
    result = env.run_python(probe_code(request), timeout=timeout)
    where = f"environment {getattr(getattr(env, 'info', None), 'id', '?')}"
    if result.timed_out:
        raise ProbeError(f"probe in {where} timed out after {timeout:g} s")
    if MARKER not in (result.output or ""):
        detail = (result.error or result.output or "").strip()[-800:]
        raise ProbeError(f"probe in {where} failed (exit {result.returncode}): {detail}")
    return parse_probe_output(result.output, where=where)


def probe_local(request: ProbeRequest, *, home: str | None = None, timeout: float = 60,
                python: str | None = None) -> State:
    """Run the probe script in a subprocess on this machine.

    Args:
        request: what to collect.
        home: the directory ``~`` expands to (default: this user's home).
        timeout: seconds allowed.
        python: interpreter to use (default: the running one).

    Raises:
        ProbeError: when the script failed or printed no State.
    """
    env = dict(os.environ)
    if home is not None:
        env["HOME"] = str(home)
    try:
        # The code goes on stdin, not argv: the request (tokens, patterns) must not appear in
        # the probe's own command line, where process_alive would find it.
        completed = subprocess.run([python or sys.executable, "-"], input=probe_code(request).encode(),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"local probe timed out after {timeout:g} s") from None
    stdout = completed.stdout.decode("utf-8", "replace")
    if completed.returncode != 0 or MARKER not in stdout:
        detail = completed.stderr.decode("utf-8", "replace").strip()[-800:]
        raise ProbeError(f"local probe failed (exit {completed.returncode}): {detail}")
    return parse_probe_output(stdout, where="local subprocess")
