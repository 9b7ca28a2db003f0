"""Size limits (osguard.server.limits): nothing an agent prints grows the host.

A 1.5 GiB ``/run_bash_script`` reply once took the host process to 5 GiB RSS. The
server now keeps 10 MiB of each stream while the command runs, and the client reads
every reply as a stream with a cap, so a server without such limits (OSWorld's VM)
cannot do it either.
"""

from __future__ import annotations

import http.server
import threading

import pytest

from osguard.actions import Action
from osguard.providers.base import Capabilities, EnvironmentInfo
from osguard.providers.client import HttpEnvironment
from osguard.server.limits import (
    EXEC_OUTPUT_BYTES,
    PROMPT_OUTPUT_CHARS,
    TRAJECTORY_A11Y_CHARS,
    clip_head,
    clip_tail,
    truncation_note,
)

pytestmark = pytest.mark.usefixtures("private_state_dir")
MIB = 1024 * 1024


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as handle:  # "5" resets VmHWM (peak RSS)
        handle.write("5")


def _peak_rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def test_a_command_printing_1_5_gib_keeps_the_host_bounded(local_provider):
    """A command printing 1.5 GiB must never again grow the host process by gigabytes:
    the reply holds 10 MiB of output with a truncation note, peak RSS grows < 200 MiB."""
    with local_provider.start(timeout=60) as env:
        _reset_peak_rss()
        before = _peak_rss_mib()
        result = env.run_bash("head -c 1536M /dev/zero | tr '\\0' a; echo done >&2", timeout=120)
        grown = _peak_rss_mib() - before
        assert result.returncode == 0
        assert result.output.startswith("aaaa")
        assert result.output.endswith(truncation_note(1536 * MIB + len("done\n") - EXEC_OUTPUT_BYTES, EXEC_OUTPUT_BYTES))
        assert len(result.output) < EXEC_OUTPUT_BYTES + 200
        assert grown < 200, f"peak RSS grew by {grown:.0f} MiB"
        # /execute bounds stdout and stderr each
        both = env.execute(["sh", "-c", "head -c 50M /dev/zero; head -c 30M /dev/zero >&2"], timeout=60)
        assert len(both.output) < EXEC_OUTPUT_BYTES + 200 and len(both.error) < EXEC_OUTPUT_BYTES + 200
        assert both.output.endswith(truncation_note(40 * MIB, EXEC_OUTPUT_BYTES))
        assert both.error.endswith(truncation_note(20 * MIB, EXEC_OUTPUT_BYTES))
        # a file read past the limit is refused, not streamed
        env.run_bash("truncate -s 101M ~/big.bin")
        with pytest.raises(Exception) as err:
            env.read_file("/home/user/big.bin")
        assert "File is larger than 104857600 bytes, osguard's limit for a read" in str(err.value)
        assert env.run_action(Action("shell", "echo still")).output == "still\n"


class _Flood(http.server.BaseHTTPRequestHandler):
    """A server with no output limit: every reply is 1.5 GiB of JSON-ish bytes."""

    protocol_version = "HTTP/1.1"

    def _flood(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.path != "/file":
            self.send_header("Transfer-Encoding", "chunked")  # no size announced up front
        else:
            self.send_header("Content-Length", str(1536 * MIB))
        self.end_headers()
        chunk = b"a" * MIB
        try:
            if self.path == "/file":
                for _ in range(1536):
                    self.wfile.write(chunk)
            else:
                self.wfile.write(b'c\r\n{"output": "\r\n')
                for _ in range(1536):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_POST = _flood  # noqa: N815
    do_GET = _flood  # noqa: N815

    def log_message(self, *args):
        pass


def test_the_client_caps_a_reply_from_a_server_without_limits():
    """The client must never read an unbounded reply into memory (OSWorld's own server
    has no output limit)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flood)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    env = HttpEnvironment(endpoint, EnvironmentInfo(id="flood", provider="test", endpoint=endpoint),
                          Capabilities(), reply_limit=16 * MIB)
    try:
        _reset_peak_rss()
        before = _peak_rss_mib()
        result = env.run_bash("yes", timeout=30)
        assert result.returncode == -1
        assert result.output == (f"environment flood: the reply to POST /run_bash_script is more than {16 * MIB} bytes, "
                                 f"over the limit of {16 * MIB} bytes (osguard.server.limits.REPLY_BYTES); it was not read")
        with pytest.raises(Exception) as err:
            env.read_file("/big")
        assert str(err.value) == (f"environment flood: the reply to POST /file is {1536 * MIB} bytes, over the limit "
                                  f"of {16 * MIB} bytes (osguard.server.limits.REPLY_BYTES); it was not read")
        assert _peak_rss_mib() - before < 100
    finally:
        env.stop()
        server.shutdown()
        server.server_close()


def test_trajectories_and_guardrail_prompts_are_bounded(tmp_path):
    """What an agent printed or showed reaches a step record and a guardrail prompt cut,
    with a note, never whole."""
    from osguard.runner.trajectory import EpisodeWriter
    from osguard.scout.types import VerifierInput
    from osguard.scout.verifiers.llm import build_user_content

    huge_tree = "<x/>" * 1_000_000
    writer = EpisodeWriter(tmp_path, "ep")
    refs = writer.save_observation(0, None, huge_tree)
    stored = (writer.dir / refs["a11y"]).read_text()
    assert stored == clip_head(huge_tree, TRAJECTORY_A11Y_CHARS)
    assert stored.endswith(truncation_note(len(huge_tree) - TRAJECTORY_A11Y_CHARS, TRAJECTORY_A11Y_CHARS,
                                           "characters"))
    writer.discard()

    output = "line\n" * 1_000_000
    item = VerifierInput(instruction="do it", action=Action("shell", "ls"), accessibility_tree=huge_tree,
                         shell_output=output)
    text = build_user_content(item, include_screenshot=False)[0]["text"]
    assert len(text) < 40_000
    assert clip_tail(output, PROMPT_OUTPUT_CHARS) in text
