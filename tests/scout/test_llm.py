"""scout:llm and deaction against the real loopback OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest

from osguard.actions import Action
from osguard.errors import ModelError
from osguard.scout import ScoutError, VerifierInput, get_verifier
from osguard.scout.verifiers.llm import parse_verdict
from osguard.testing import OpenAIServer, estimate_tokens

PNG = b"\x89PNG\r\n\x1a\nfake-png-bytes"


def _item(**kw) -> VerifierInput:
    base = dict(instruction="Rename todo_list_Jan_1 to todo_list_Jan_2",
                action=Action("shell", "mv todo_list_Jan_1 todo_list_Jan_2"),
                screenshot=PNG, accessibility_tree="<desktop-frame name='Desktop'/>")
    base.update(kw)
    return VerifierInput(**base)


@pytest.mark.parametrize("text,expected", [
    ('{"label": "unsafe", "feedback": "deletes the archive"}', ("unsafe", "deletes the archive")),
    ('```json\n{"label": "allowed"}\n```', ("allowed", "")),
    ('  {"label": "Unrelated", "feedback": "off task"}  ', ("unrelated", "off task")),
    ('Sure! {"label": "allowed"}', ("invalid", "unparseable verifier output")),
    ('{"label": "block"}', ("invalid", "verifier output has no valid label (got 'block')")),
    ('["allowed"]', ("invalid", "unparseable verifier output")),
    ('{"label": "allowed"', ("invalid", "unparseable verifier output")),
    ("allowed", ("invalid", "unparseable verifier output")),
    (None, ("invalid", "unparseable verifier output")),
])
def test_parse_verdict_is_strict(text, expected):
    assert parse_verdict(text) == expected


def test_llm_verifier_prompt_and_verdict():
    with OpenAIServer(['{"label": "unsafe", "feedback": "renames the archive too"}']) as server:
        verifier = get_verifier("scout:llm:guard-model", base_url=server.base_url, api_key="sk-x")
        assert verifier.name == "scout:llm:guard-model"
        verdict = verifier.judge(_item())
        assert (verdict.label, verdict.feedback) == ("unsafe", "renames the archive too")
        assert verdict.blocks
        assert verdict.raw == '{"label": "unsafe", "feedback": "renames the archive too"}'
        assert verdict.usage["prompt_tokens"] > 0 and verdict.usage["completion_tokens"] > 0
        (request,) = server.chat_requests
        assert request["model"] == "guard-model"
        assert request["temperature"] == 0
        system, user = request["messages"]
        assert system["role"] == "system" and "unsafe takes precedence" in system["content"]
        text = user["content"][0]["text"]
        assert "Rename todo_list_Jan_1 to todo_list_Jan_2" in text
        assert "<desktop-frame name='Desktop'/>" in text
        assert "mv todo_list_Jan_1 todo_list_Jan_2" in text
        assert user["content"][2]["image_url"]["url"].startswith("data:image/png;base64,")


def test_invalid_output_is_recorded_not_mapped():
    with OpenAIServer(["I think this is fine."]) as server:
        verdict = get_verifier("scout:llm", model="m", base_url=server.base_url).judge(_item())
        assert verdict.label == "invalid"
        assert verdict.raw == "I think this is fine."
        assert verdict.blocks


def test_endpoint_failures_raise_model_error_after_bounded_retries():
    with OpenAIServer(default='{"label": "allowed"}') as server:
        dead_url = server.base_url
        verifier = get_verifier("scout:llm:m", base_url=server.base_url, max_retries=1)
        server.fail_next(500, count=2, headers={"retry-after": "0"})
        with pytest.raises(ModelError) as info:
            verifier.judge(_item())
        assert str(info.value) == (f"model endpoint {server.base_url} answered HTTP 500 for model 'm': "
                                   "injected server error")
        assert len(server.requests) == 2  # one try + one bounded retry
        server.fail_next(429, headers={"retry-after": "0"})
        assert verifier.judge(_item()).label == "allowed"  # retried through a transient 429
        server.malformed_next()
        with pytest.raises(ModelError) as info:
            get_verifier("scout:llm:m", base_url=server.base_url, max_retries=0).judge(_item())
        assert str(info.value) == f"model endpoint {server.base_url} sent a malformed response: JSONDecodeError"
    with pytest.raises(ModelError) as info:
        get_verifier("scout:llm:m", base_url=dead_url, max_retries=0, timeout_s=2).judge(_item())
    assert str(info.value) == f"cannot connect to model endpoint {dead_url}"


def test_timeout_is_model_error():
    with OpenAIServer(default='{"label": "allowed"}', delay_s=1.0) as server:
        verifier = get_verifier("scout:llm:m", base_url=server.base_url, timeout_s=0.2, max_retries=0)
        with pytest.raises(ModelError) as info:
            verifier.judge(_item())
        assert str(info.value) == f"model endpoint {server.base_url} timed out (model 'm')"


def test_configuration_errors(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OSGUARD_VERIFIER_MODEL", raising=False)
    with pytest.raises(ScoutError) as info:
        get_verifier("scout:llm", base_url="http://127.0.0.1:9/v1")
    assert str(info.value) == "verifier 'scout:llm' needs a model: scout:llm:MODEL or --model MODEL"
    with pytest.raises(ScoutError) as info:
        get_verifier("scout:llm:m")
    assert str(info.value) == ("verifier 'scout:llm' needs an endpoint: set OPENAI_BASE_URL or pass "
                               "--base-url (an OpenAI-compatible URL ending in /v1)")
    with pytest.raises(ScoutError) as info:
        get_verifier("deaction:m", base_url="http://127.0.0.1:9/v1", colour="red")
    assert str(info.value).startswith("verifier 'deaction': unknown option(s) colour (known: model, base_url")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OSGUARD_VERIFIER_MODEL", "env-model")
    assert get_verifier("scout:llm").name == "scout:llm:env-model"


def test_deaction_two_stages():
    with OpenAIServer() as server:
        verifier = get_verifier("deaction:claude", base_url=server.base_url)
        assert verifier.name == "deaction:claude"
        server.push('{"aligned": true, "reason": "renames the folder as asked"}')
        ok = verifier.judge(_item())
        assert (ok.label, ok.feedback) == ("allowed", "renames the folder as asked")
        assert len(server.chat_requests) == 1
        server.push('{"aligned": false, "reason": "global"}',
                    '{"semantics": "s", "goal_relation": "g", "risk": "r", "label": "unsafe", "feedback": "too wide"}')
        bad = verifier.judge(_item(action=Action("shell", "find ~ -name x -execdir mv {} y \\;")))
        assert (bad.label, bad.feedback) == ("unsafe", "too wide")
        requests = server.chat_requests
        assert len(requests) == 3
        assert "DeAction-Fast" in requests[1]["messages"][0]["content"]
        assert "systematic" in requests[2]["messages"][0]["content"]
        # usage covers both stages (the server's estimate, per request)
        assert bad.usage["prompt_tokens"] == sum(
            estimate_tokens(json.dumps(r["messages"])) for r in requests[1:])
        assert json.loads(bad.raw)["fast"] == '{"aligned": false, "reason": "global"}'
        server.push("not json")
        assert verifier.judge(_item()).label == "invalid"
        server.push('{"aligned": false}', "nope")
        assert verifier.judge(_item()).label == "invalid"


def test_replies_are_read_as_plain_json_with_the_same_errors_and_usage():
    """Regression: the reply is read as plain JSON (not the typed ChatCompletion model); a
    reply without choices must still say so, usage must still be counted, and a reply
    whose content is null must still be an invalid verdict, never a crash."""
    with OpenAIServer([{"id": "x", "choices": []},
                       {"choices": [{"message": {"role": "assistant", "content": '{"label": "allowed"}'}}],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
                       {"choices": [{"message": {"role": "assistant", "content": None}}]}]) as server:
        verifier = get_verifier("scout:llm:m", base_url=server.base_url, max_retries=0)
        with pytest.raises(ModelError) as info:
            verifier.judge(_item())
        assert str(info.value) == f"model endpoint {server.base_url} sent a response without choices"
        verdict = verifier.judge(_item())
        assert (verdict.label, dict(verdict.usage)) == ("allowed", {"prompt_tokens": 7, "completion_tokens": 3})
        assert verifier.judge(_item()).label == "invalid"
