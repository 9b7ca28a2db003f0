"""A real OpenAI-compatible HTTP server on loopback, for tests and benchmarks.

It speaks just enough of the OpenAI REST protocol for the ``openai`` client (and any
plain HTTP client) to talk to it: ``POST /v1/chat/completions`` (non-streaming, with
usage tokens) and ``GET /v1/models``. It binds to ``127.0.0.1`` on a free port and is
scriptable:

- a queue of replies (``push``), consumed in order, then a ``responder`` callable
  ``responder(request_json) -> str | dict | Fault | Malformed``, then ``default``;
- a fixed response delay (``delay_s``), slept in the handler thread so concurrent
  requests overlap like a real endpoint's;
- error injection: ``Fault(status=500|429|..., message=..., headers=...)`` and
  ``Malformed(body=...)`` replies, or ``fail_next(...)`` / ``malformed_next(...)``;
- a record of every request received (``requests``), and the peak number of requests
  served at once (``max_in_flight``).

A reply that is a ``str`` becomes the assistant message content; a ``ToolReply`` becomes
``tool_calls``; a ``dict`` is sent as the whole response body, unchanged (to test odd
shapes). Usage tokens are computed from the request as received (``osguard.testing.
tokens``: text at four characters per token, each image by its pixel size).

Like the real API, a request whose assistant ``tool_calls`` are not each answered by a
``tool`` message is refused (HTTP 400), so an agent that loses a call's result fails here
as it would against a real endpoint.

Example:
    >>> with OpenAIServer(responder=lambda req: '{"label": "allowed"}') as server:
    ...     client = openai.OpenAI(base_url=server.base_url, api_key="test")
    ...     client.chat.completions.create(model="m", messages=[...])
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union


@dataclass(frozen=True)
class Fault:
    """An injected HTTP error reply (OpenAI error body shape)."""

    status: int = 500
    message: str = "injected server error"
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"retry-after": "0"}


@dataclass(frozen=True)
class Malformed:
    """An injected HTTP 200 reply whose body is not a valid completion."""

    body: bytes = b'{"choices": [{"message": '
    content_type: str = "application/json"


@dataclass(frozen=True)
class ToolCall:
    """One tool call a scripted model makes: ``name`` (``computer`` is the computer-use
    tool) and its arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolReply:
    """A scripted model turn with tool calls (and optional text), wrapped in each API's
    shape by the server that sends it (tool_calls, tool_use blocks, computer_call items)."""

    calls: tuple[ToolCall, ...] = ()
    text: str = ""

    @classmethod
    def of(cls, *calls: tuple[str, dict[str, Any]], text: str = "") -> "ToolReply":
        """``ToolReply.of(("computer", {...}), ("bash", {...}), text="...")``."""
        return cls(tuple(ToolCall(name, dict(args)) for name, args in calls), text)


Reply = Union[str, dict, Fault, Malformed, ToolReply]
Responder = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, recorded before it is answered."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    received_at: float  # time.monotonic()

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or None when it is empty or not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    @property
    def text(self) -> str:
        """The raw body as text (for "does any request contain X" checks)."""
        return self.body.decode("utf-8", "replace")


def estimate_tokens(text: str) -> int:
    """A deterministic token estimate: one token per four characters, at least one."""
    return max(1, (len(text) + 3) // 4)


class OpenAIServer:
    """A scriptable OpenAI-compatible chat-completions server on 127.0.0.1 (context manager, thread-safe).

    Args:
        replies: initial reply queue (see the module docstring for reply shapes).
        responder: called with the request JSON when the queue is empty.
        default: reply used when the queue is empty and there is no responder; with
            neither, the server answers HTTP 500 "no scripted reply left" so that a
            test that forgot to script a reply fails loudly.
        delay_s: seconds from receiving each chat request (its body read) to answering it;
            the server's own parsing of the request counts in them.
        models: model ids listed by ``GET /v1/models``.
        api_key: when set, requests without ``Authorization: Bearer <api_key>`` get 401.
        port: port to bind (0: a free one).
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        responder: Responder | None = None,
        default: Reply | None = None,
        delay_s: float = 0.0,
        models: Iterable[str] = ("test-model",),
        api_key: str | None = None,
        port: int = 0,
    ) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque(replies)
        self.responder = responder
        self.default = default
        self.delay_s = delay_s
        self.models = list(models)
        self.api_key = api_key
        self._requested_port = port
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- the API this server speaks (overridden by the other APIs' servers) ---------------
    route = "/v1/chat/completions"

    def _check(self, payload: Any) -> str | None:
        """None when the request body is acceptable, else the HTTP 400 message."""
        if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
            return "the body must be a JSON object with 'messages'"
        if payload.get("stream"):
            return "streaming is not supported by this test server"
        messages = payload["messages"]
        for i, message in enumerate(messages):
            ids = [c.get("id") for c in (message.get("tool_calls") or []) if isinstance(c, dict)]
            if message.get("role") != "assistant" or not ids:
                continue
            answered = set()
            for follower in messages[i + 1:]:
                if follower.get("role") != "tool":
                    break
                answered.add(follower.get("tool_call_id"))
            missing = [x for x in ids if x not in answered]
            if missing:
                return ("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                        f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                        f"{', '.join(map(str, missing))}")
        return None

    def _authorized(self, headers: dict[str, str]) -> bool:
        return self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}"

    def _answer(self, request_json: dict[str, Any], reply: "str | ToolReply") -> dict[str, Any]:
        return self._completion(request_json, reply)

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> "OpenAIServer":
        """Bind 127.0.0.1 and serve in a background thread. Returns self."""
        if self._httpd is not None:
            return self
        handler = _make_handler(self)
        httpd = _Server(("127.0.0.1", self._requested_port), handler)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"openai-server-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client (ends with ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -----------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        """Append replies to the queue (served in order, before the responder)."""
        with self._lock:
            self._queue.extend(replies)

    def fail_next(self, status: int = 500, count: int = 1, message: str = "injected server error",
                  headers: dict[str, str] | None = None) -> None:
        """Make the next ``count`` queued replies HTTP errors (pushed at the queue's front)."""
        with self._lock:
            for _ in range(count):
                self._queue.appendleft(Fault(status, message, dict(headers or {})))

    def malformed_next(self, count: int = 1, body: bytes = Malformed.body) -> None:
        """Make the next ``count`` replies malformed 200 bodies (pushed at the queue's front)."""
        with self._lock:
            for _ in range(count):
                self._queue.appendleft(Malformed(body))

    @property
    def pending(self) -> int:
        """Replies left in the queue."""
        with self._lock:
            return len(self._queue)

    # -- records -------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a copy), in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completion requests received so far."""
        return [r.json for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    @property
    def max_in_flight(self) -> int:
        """The largest number of chat requests that were being served at the same time."""
        with self._lock:
            return self._max_in_flight

    def clear(self) -> None:
        """Forget recorded requests and the in-flight peak (the queue is kept)."""
        with self._lock:
            self._requests.clear()
            self._max_in_flight = self._in_flight

    # -- internals used by the handler ----------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _next_reply(self, request_json: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            responder, default = self.responder, self.default
        if responder is not None:
            return responder(request_json)
        if default is not None:
            return default
        return Fault(500, "osguard test server: no scripted reply left")

    def _completion(self, request_json: dict[str, Any], content: "str | ToolReply") -> dict[str, Any]:
        from osguard.testing.tokens import openai_request_tokens

        message: dict[str, Any] = {"role": "assistant", "content": content}
        if isinstance(content, ToolReply):
            calls = [{"id": f"call_osguard_{next(self._ids)}", "type": "function",
                      "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in content.calls]
            message = {"role": "assistant", "content": content.text or None, "tool_calls": calls}
            said = content.text + json.dumps(calls)
        else:
            said = content
        prompt_tokens = openai_request_tokens(request_json)
        completion_tokens = estimate_tokens(said)
        return {
            "id": f"chatcmpl-osguard-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(request_json.get("model", self.models[0] if self.models else "test-model")),
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if isinstance(content, ToolReply) else "stop",
                "logprobs": None,
            }],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the requests to this server's API route, in arrival order."""
        return [r.json for r in self.requests if r.path.rstrip("/") == self.route]


def _error_body(message: str, status: int) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            429: "rate_limit_error"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Many concurrent clients (the scoring bench at 32) must not overflow a short backlog:
    # a dropped connection costs a 1 s SYN retransmit or a reset. A class attribute, since
    # listen() runs in the constructor (setting it on the instance afterwards did nothing).
    request_queue_size = 128


def _make_handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the openai client (httpx) expects
        server_version = "osguard-openai-test/1"
        # Headers and body go out in separate writes; with Nagle on, a keep-alive client's
        # delayed ACK would add ~40 ms to every reply.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # tests read server.requests; stderr noise helps nobody

        def _send(self, status: int, body: bytes, content_type: str = "application/json",
                  headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(payload).encode(), headers=headers)

        def _read_and_record(self) -> RecordedRequest:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = RecordedRequest(
                method=self.command, path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body, received_at=time.monotonic())
            server._record(request)
            return request

        def _authorized(self, request: RecordedRequest) -> bool:
            if server._authorized(request.headers):
                return True
            self._send_json(401, _error_body("invalid api key", 401))
            return False

        def do_GET(self) -> None:  # noqa: N802
            request = self._read_and_record()
            if not self._authorized(request):
                return
            if self.path.rstrip("/") == "/v1/models":
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "osguard-test"}
                        for m in server.models]
                self._send_json(200, {"object": "list", "data": data})
            else:
                self._send_json(404, _error_body(f"no route GET {self.path}", 404))

        def do_POST(self) -> None:  # noqa: N802
            request = self._read_and_record()
            if not self._authorized(request):
                return
            if self.path.rstrip("/") != server.route:
                self._send_json(404, _error_body(f"no route POST {self.path}", 404))
                return
            payload = request.json
            problem = server._check(payload)
            if problem is not None:
                self._send_json(400, _error_body(problem, 400))
                return
            server._enter()
            try:
                if server.delay_s > 0:
                    # A fixed latency from the request's arrival: the time this server spent
                    # parsing and checking it is part of the delay, not added to it (the
                    # server shares the client's cores; a real endpoint's work is inside its
                    # latency). The reply itself is made after the wait (scripted replies
                    # are taken in the order the waits end, as before).
                    remaining = request.received_at + server.delay_s - time.monotonic()
                    if remaining > 0:
                        time.sleep(remaining)
                try:
                    reply = server._next_reply(payload)
                except Exception as exc:  # a broken responder is the test's bug: say so
                    self._send_json(500, _error_body(f"responder raised {exc!r}", 500))
                    return
                if isinstance(reply, Fault):
                    self._send_json(reply.status, _error_body(reply.message, reply.status),
                                    headers=reply.headers)
                elif isinstance(reply, Malformed):
                    self._send(200, reply.body, reply.content_type)
                elif isinstance(reply, dict):
                    self._send_json(200, reply)
                else:
                    self._send_json(200, server._answer(payload, reply if isinstance(reply, ToolReply)
                                                        else str(reply)))
            finally:
                server._leave()

    return Handler
