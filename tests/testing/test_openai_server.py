"""The loopback OpenAI-compatible server, exercised with the real ``openai`` client and httpx."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import openai
import pytest

from osguard.testing import Fault, Malformed, OpenAIServer, estimate_tokens

MESSAGES = [{"role": "user", "content": "hello"}]


def _client(server: OpenAIServer, retries: int = 0, key: str = "sk-test") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=retries, timeout=10)


def test_binds_loopback_and_lists_models():
    with OpenAIServer(models=["m-a", "m-b"]) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        ids = [m.id for m in _client(server).models.list()]
        assert ids == ["m-a", "m-b"]
        assert server.requests[0].method == "GET"
        assert server.requests[0].path == "/v1/models"


def test_queue_then_responder_then_default_with_usage():
    seen: list[dict] = []

    def responder(request: dict) -> str:
        seen.append(request)
        return f"echo:{request['messages'][-1]['content']}"

    with OpenAIServer(["first", "second"], responder=responder) as server:
        client = _client(server)
        texts = [client.chat.completions.create(model="x", messages=MESSAGES).choices[0].message.content
                 for _ in range(3)]
        assert texts == ["first", "second", "echo:hello"]
        assert len(seen) == 1
        completion = client.chat.completions.create(model="my-model", messages=MESSAGES)
        assert completion.model == "my-model"
        prompt_tokens = estimate_tokens(json.dumps(MESSAGES))
        assert completion.usage.prompt_tokens == prompt_tokens
        assert completion.usage.completion_tokens == estimate_tokens("echo:hello")
        assert completion.usage.total_tokens == prompt_tokens + estimate_tokens("echo:hello")
    with OpenAIServer(default="always") as server:
        assert _client(server).chat.completions.create(model="x", messages=MESSAGES).choices[0].message.content == "always"


def test_no_scripted_reply_fails_loudly():
    with OpenAIServer() as server:
        with pytest.raises(openai.InternalServerError) as info:
            _client(server).chat.completions.create(model="x", messages=MESSAGES)
        assert "no scripted reply left" in str(info.value)


def test_records_every_request_body_and_headers():
    with OpenAIServer(default="ok") as server:
        _client(server, key="sk-abc").chat.completions.create(
            model="x", messages=[{"role": "user", "content": "canary-123"}], temperature=0)
        (request,) = server.requests
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer sk-abc"
        assert request.json["temperature"] == 0
        assert "canary-123" in request.text
        assert server.chat_requests == [request.json]
        server.clear()
        assert server.requests == []


def test_error_injection_statuses_and_retries():
    with OpenAIServer(default="ok") as server:
        server.fail_next(500)
        with pytest.raises(openai.InternalServerError):
            _client(server).chat.completions.create(model="x", messages=MESSAGES)
        server.fail_next(429, message="slow down")
        with pytest.raises(openai.RateLimitError) as info:
            _client(server).chat.completions.create(model="x", messages=MESSAGES)
        assert "slow down" in str(info.value)
        # The client's bounded retries get through a transient 429 then succeed.
        server.fail_next(429, headers={"retry-after": "0"})
        server.clear()
        reply = _client(server, retries=2).chat.completions.create(model="x", messages=MESSAGES)
        assert reply.choices[0].message.content == "ok"
        assert len(server.requests) == 2


def test_fault_and_malformed_in_queue_and_raw_dict():
    raw = {"not": "a completion"}
    with OpenAIServer([Fault(503, "down"), Malformed(b"{{{"), raw, "fine"]) as server:
        url = server.base_url + "/chat/completions"
        body = {"model": "x", "messages": MESSAGES}
        first = httpx.post(url, json=body)
        assert first.status_code == 503
        assert first.json()["error"]["message"] == "down"
        second = httpx.post(url, json=body)
        assert second.status_code == 200
        assert second.content == b"{{{"
        assert httpx.post(url, json=body).json() == raw
        assert httpx.post(url, json=body).json()["choices"][0]["message"]["content"] == "fine"
        assert server.pending == 0
        server.malformed_next()
        # The openai client surfaces an unparseable body as a JSON decoding error.
        with pytest.raises(json.JSONDecodeError):
            _client(server).chat.completions.create(model="x", messages=MESSAGES)


def test_bad_requests_are_rejected_with_openai_error_bodies():
    with OpenAIServer(default="ok", api_key="sk-right") as server:
        url = server.base_url
        assert httpx.post(url + "/chat/completions", json={"messages": []}).status_code == 401
        auth = {"Authorization": "Bearer sk-right"}
        missing = httpx.post(url + "/chat/completions", content=b"nope", headers=auth)
        assert missing.status_code == 400
        assert missing.json()["error"]["message"] == "the body must be a JSON object with 'messages'"
        stream = httpx.post(url + "/chat/completions", json={"messages": [], "stream": True}, headers=auth)
        assert stream.json()["error"]["message"] == "streaming is not supported by this test server"
        assert httpx.get(url + "/nothing", headers=auth).status_code == 404
        assert httpx.post(url + "/chat/completions", json={"messages": []}, headers=auth).status_code == 200


def test_delay_overlaps_concurrent_requests():
    """Concurrent requests must be served in parallel: the bench relies on it."""
    with OpenAIServer(default="ok", delay_s=0.3) as server:
        client = _client(server)
        errors: list[BaseException] = []

        def call() -> None:
            try:
                client.chat.completions.create(model="x", messages=MESSAGES)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=call) for _ in range(8)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        assert errors == []
        assert 0.3 <= elapsed < 1.2
        assert server.max_in_flight == 8
        assert len(server.requests) == 8


def test_stop_releases_the_port():
    server = OpenAIServer(default="ok").start()
    port = server.port
    server.stop()
    server.stop()  # idempotent
    assert not server.running
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    with pytest.raises(RuntimeError, match="the server is not started"):
        _ = server.base_url


def test_broken_responder_reports_its_exception():
    def responder(request: dict) -> str:
        raise ValueError("boom")

    with OpenAIServer(responder=responder) as server:
        response = httpx.post(server.base_url + "/chat/completions", json={"messages": []})
        assert response.status_code == 500
        assert response.json()["error"]["message"] == "responder raised ValueError('boom')"


def test_the_listen_backlog_holds_a_burst_of_concurrent_clients():
    """Regression: the server must listen with a backlog of 128. Before, the backlog was
    set on the instance after listen() had run (still 5), so a burst of 32 concurrent
    clients (the scoring bench) overflowed it: resets and 1 s SYN retransmits."""
    import shutil
    import subprocess

    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed: the backlog cannot be read")
    with OpenAIServer() as server:
        port = server.base_url.split(":")[2].split("/")[0]
        lines = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                               check=True).stdout.split("\n")
        listening = [line.split() for line in lines if line.startswith("LISTEN")]
        assert len(listening) == 1
        assert int(listening[0][2]) == 128  # ss shows a listening socket's backlog as Send-Q
