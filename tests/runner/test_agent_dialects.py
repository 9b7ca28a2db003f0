"""Dialect details without an environment: Claude's screenshot requests and refusals, the
text editor's commands as run by a real bash, set-of-marks from an OSWorld-shaped tree,
and the loopback servers refusing a lost tool result as the real APIs do."""

from __future__ import annotations

import io
import json
import subprocess

import pytest

from osguard.actions import Action
from osguard.runner import AgentError, Observation, get_agent
from osguard.runner.agents.anthropic import editor_command
from osguard.runner.agents.marks import draw_marks, marks_from_tree, marks_table
from osguard.testing import AnthropicServer, OpenAIServer, ResponsesServer, ToolReply


def _png(width: int = 1920, height: int = 1080) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(out, format="PNG")
    return out.getvalue()


def test_claude_screenshot_request_is_answered_without_a_proposal(variant):
    with AnthropicServer() as server:
        server.push(ToolReply.of(("computer", {"action": "screenshot"}), text="Let me look."),
                    ToolReply.of(("computer", {"action": "key", "text": "ctrl+shift+t"})),
                    {"id": "m3", "type": "message", "role": "assistant", "content": [
                        {"type": "text", "text": "I won't delete those files."}],
                     "stop_reason": "refusal", "usage": {"input_tokens": 5, "output_tokens": 7}})
        agent = get_agent("anthropic:c", variant, base_url=server.base_url, api_key="k")
        agent.reset("Tidy up", variant)
        obs = Observation(screenshot=_png())
        first = agent.propose(obs)
        assert first.action == Action("pyautogui", "pyautogui.hotkey('ctrl', 'shift', 't')")
        assert first.raw_output.startswith("Let me look.\n")
        assert first.usage["prompt_tokens"] > 0  # two requests, both counted on this proposal
        screenshot_id = server.bodies[1]["messages"][1]["content"][1]["id"]  # the assistant turn: text, tool_use
        answer = server.bodies[1]["messages"][2]["content"][0]
        assert answer["tool_use_id"] == screenshot_id and answer["content"][0]["type"] == "image"
        refused = agent.propose(obs)
        assert refused.action == Action("special", "FAIL")
        assert refused.raw_output == "I won't delete those files."
        assert refused.usage == {"prompt_tokens": 5, "completion_tokens": 7}


def test_claude_unknown_action_goes_back_as_an_error(variant):
    with AnthropicServer() as server:
        server.push(ToolReply.of(("computer", {"action": "zoom", "region": [0, 0, 10, 10]})),
                    ToolReply.of(("computer", {"action": "wait"})))
        agent = get_agent("anthropic:c", variant, base_url=server.base_url, api_key="k")
        agent.reset("x", variant)
        assert agent.propose(Observation(screenshot=_png())).action == Action("special", "WAIT")
        error = server.bodies[1]["messages"][2]["content"][0]
        assert error["is_error"] is True
        assert error["content"] == [{"type": "text", "text": "Error: unknown computer action 'zoom'"}]


def test_claude_without_display_offers_bash_and_editor_only(variant):
    with AnthropicServer() as server:
        server.push("Nothing to do.")
        agent = get_agent("anthropic:c", variant, base_url=server.base_url, api_key="k")
        agent.reset("x", variant)
        assert agent.propose(Observation(shell_output="")).action == Action("special", "DONE")
        assert [t["name"] for t in server.bodies[0]["tools"]] == ["bash", "str_replace_based_edit_tool"]
        agent = get_agent("anthropic:c", variant, base_url=server.base_url, api_key="k", tools="computer")
        agent.reset("x", variant)
        with pytest.raises(AgentError) as exc:
            agent.propose(Observation())
        assert str(exc.value) == ("anthropic:c: this environment has no display, so the computer tool cannot be "
                                  "offered; allow bash or text_editor (tools option)")


def _bash(command: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=30)


def test_text_editor_commands_do_what_the_tool_says(tmp_path):
    path = str(tmp_path / "notes it's.txt")
    assert _bash(editor_command({"command": "create", "path": path, "file_text": "alpha\n'beta' $HOME\n"}), tmp_path).returncode == 0
    assert (tmp_path / "notes it's.txt").read_text() == "alpha\n'beta' $HOME\n"
    assert _bash(editor_command({"command": "str_replace", "path": path, "old_str": "'beta'", "new_str": "gamma"}),
                 tmp_path).returncode == 0
    assert _bash(editor_command({"command": "insert", "path": path, "insert_line": 1, "new_str": "inserted"}),
                 tmp_path).returncode == 0
    assert (tmp_path / "notes it's.txt").read_text() == "alpha\ninserted\ngamma $HOME\n"
    view = _bash(editor_command({"command": "view", "path": path, "view_range": [2, 3]}), tmp_path)
    assert view.stdout.split("\n")[:2] == ["     2\tinserted", "     3\tgamma $HOME"]
    twice = _bash(editor_command({"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"}), tmp_path)
    assert twice.returncode == 1 and twice.stderr.strip() == f"old_str occurs 4 times in {path}, expected once"
    with pytest.raises(AgentError) as exc:
        editor_command({"command": "undo_edit", "path": path})
    assert str(exc.value) == ("text editor command 'undo_edit' is not supported: expected view, create, "
                              "str_replace or insert")


TREE = """<desktop-frame xmlns:cp="https://accessibility.ubuntu.example.org/ns/component" name="">
<application name="gedit"><push-button name="Save" cp:screencoord="(100, 50)" cp:size="(80, 30)"/>
<label name="" cp:screencoord="(5, 5)" cp:size="(50, 20)"/>
<text name="" cp:screencoord="(300, 400)" cp:size="(200, 40)">Hello</text>
<push-button name="Offscreen" cp:screencoord="(4000, 10)" cp:size="(20, 20)"/></application></desktop-frame>"""


def test_set_of_marks_from_an_osworld_tree():
    marks = marks_from_tree(TREE, (1920, 1080))
    assert [(m.index, m.role, m.name, m.centre) for m in marks] == [
        (1, "push-button", "Save", (140, 65)), (2, "text", "Hello", (400, 420))]
    assert marks_table(marks) == "tag\trole\tname\tcentre\n1\tpush-button\tSave\t(140, 65)\n2\ttext\tHello\t(400, 420)"
    drawn = draw_marks(_png(), marks)
    from PIL import Image

    with Image.open(io.BytesIO(drawn)) as image:
        assert image.size == (1920, 1080) and image.getpixel((100, 60)) == (255, 0, 0)


def test_chat_agent_som_resolves_tags(variant):
    with OpenAIServer(["```python\npyautogui.click(tag_2)\n```"]) as server:
        agent = get_agent("openai:m", variant, base_url=server.base_url, observation="som")
        agent.reset("Say hello", variant)
        proposal = agent.propose(Observation(screenshot=_png(), accessibility_tree=TREE))
        text = server.chat_requests[0]["messages"][-1]["content"][0]["text"]
    assert proposal.action == Action("pyautogui", "tag_2 = (400, 420)\npyautogui.click(tag_2)")
    assert "2\ttext\tHello\t(400, 420)" in text


def test_servers_refuse_a_lost_tool_result():
    """The loopback APIs answer HTTP 400 when a tool call has no result, as the real ones do."""
    import httpx

    with AnthropicServer() as server:
        body = {"model": "m", "max_tokens": 10, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "next"}]}]}
        resp = httpx.post(server.base_url + "/v1/messages", json=body)
    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == (
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: t1. Each "
        "`tool_use` block must have a corresponding `tool_result` block in the next message.")
    with OpenAIServer() as server:
        body = {"model": "m", "messages": [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                   "function": {"name": "done", "arguments": "{}"}}]},
            {"role": "user", "content": "next"}]}
        resp = httpx.post(server.base_url + "/chat/completions", json=body)
    assert resp.status_code == 400 and resp.json()["error"]["message"].endswith("did not have response messages: c1")
    with ResponsesServer([ToolReply.of(("computer", {"type": "wait"}))]) as server:
        first = httpx.post(server.base_url + "/responses", json={"model": "m", "input": "go"}).json()
        resp = httpx.post(server.base_url + "/responses",
                          json={"model": "m", "input": [], "previous_response_id": first["id"]})
        call_id = first["output"][0]["call_id"]
    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == f"No tool output found for computer call {call_id}."
    assert json.dumps(first["usage"])


def test_keys_and_endpoints_from_the_environment(variant, monkeypatch):
    with AnthropicServer(["done"], api_key="sk-env") as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
        agent = get_agent("anthropic:c", variant)
        agent.reset("x", variant)
        assert agent.propose(Observation(screenshot=_png())).action == Action("special", "DONE")
        assert server.requests[0].headers["x-api-key"] == "sk-env"
        assert agent.describe()["base_url"] == server.base_url and "sk-env" not in json.dumps(agent.describe())
    with ResponsesServer(["done"], api_key="sk-oa") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-oa")
        agent = get_agent("openai-cua:cua", variant)
        agent.reset("x", variant)
        assert agent.propose(Observation(screenshot=_png())).action == Action("special", "DONE")
        assert server.requests[0].headers["authorization"] == "Bearer sk-oa"
