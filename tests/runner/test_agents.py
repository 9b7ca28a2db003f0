"""Agents: replay (references and recorded files), openai:MODEL against a real loopback
OpenAI-compatible server, python: plug-ins, and the registry's errors."""

from __future__ import annotations

import json

import pytest

from osguard.actions import Action
from osguard.errors import OsguardError, UnknownNameError
from osguard.runner import AgentError, Observation, get_agent
from osguard.runner.agents.parsers import parse

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def test_replay_safe_then_done(variant):
    agent = get_agent("replay:safe", variant)
    agent.reset(variant.base.instruction, variant)
    codes = [agent.propose(Observation()).action.code for _ in range(4)]
    assert codes == ["ls ~/Desktop", "mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2", "DONE", "DONE"]


def test_replay_repeats_a_blocked_action(variant):
    agent = get_agent("replay:unsafe", variant)
    agent.reset(variant.base.instruction, variant)
    first = agent.propose(Observation()).action
    again = agent.propose(Observation(), feedback="no").action
    assert first == again and first.code.startswith("find ~ -type d")
    assert agent.propose(Observation()).action == Action("special", "DONE")


def test_replay_file_list_and_mapping(variant, tmp_path):
    listed = tmp_path / "list.yaml"
    listed.write_text("- echo one\n- {pyautogui: 'pyautogui.press(\"enter\")'}\n- FAIL\n")
    agent = get_agent(f"replay:{listed}", variant)
    got = [agent.propose(Observation()).action for _ in range(3)]
    assert got == [Action("shell", "echo one"), Action("pyautogui", 'pyautogui.press("enter")'), Action("special", "FAIL")]
    mapped = tmp_path / "map.json"
    mapped.write_text(json.dumps({variant.id: ["echo mapped"], "other": ["x"]}))
    assert get_agent(f"replay:{mapped}", variant).propose(Observation()).action == Action("shell", "echo mapped")


def test_replay_file_errors(variant, tmp_path):
    mapped = tmp_path / "map.yaml"
    mapped.write_text("other-variant: [ls]\n")
    with pytest.raises(OsguardError) as exc:
        get_agent(f"replay:{mapped}", variant)
    assert str(exc.value) == (f"replay file {mapped}: no actions for variant 'rt-rename-todo' "
                              "(the file maps 1 variant id(s): other-variant)")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- ls\n- {click: 3}\n")
    with pytest.raises(OsguardError) as exc:
        get_agent(f"replay:{bad}", variant)
    assert str(exc.value) == (f"replay file {bad}: $[1]: an action is a string (shell command, WAIT, DONE or FAIL) "
                              "or a mapping {shell: CODE} or {pyautogui: CODE} (optionally with wait_for: {...})")
    with pytest.raises(OsguardError) as exc:
        get_agent("replay:nowhere.yaml", variant)
    assert str(exc.value) == ("agent 'replay:nowhere.yaml': expected safe, unsafe, unsafe-then-safe, noop or a YAML/JSON file "
                              "of actions; no file nowhere.yaml")


def test_unknown_agent_kind_suggests(variant):
    with pytest.raises(UnknownNameError) as exc:
        get_agent("replai:safe", variant)
    assert str(exc.value) == ("unknown agent 'replai:safe': expected one of anthropic:..., openai:..., "
                              "openai-cua:..., openai-tools:..., python:..., replay:...; did you mean 'replay'?")


@pytest.mark.parametrize("text,space,expected", [
    ("Reflection.\n```python\npyautogui.click(10, 20)\n```", "pyautogui", Action("pyautogui", "pyautogui.click(10, 20)")),
    ("```bash\nmv a b\n```", "shell", Action("shell", "mv a b")),
    ("All done.\n```DONE```", "pyautogui", Action("special", "DONE")),
    ("```\nWAIT\n```", "shell", Action("special", "WAIT")),
    ("FAIL", "shell", Action("special", "FAIL")),
])
def test_parse_action(text, space, expected):
    assert parse(text, space) == [expected]


def test_openai_agent_prompt_feedback_and_usage(variant, model_server):
    model_server.push("I will look first.\n```bash\nls ~/Desktop\n```", "```bash\nmv todo_list_Jan_1 todo_list_Jan_2\n```")
    agent = get_agent("openai:test-model", variant, base_url=model_server.base_url, api_key="k",
                      observation="both", action_space="shell")
    agent.reset(variant.base.instruction, variant)
    obs = Observation(screenshot=PNG, accessibility_tree="<desktop-frame/>", shell_output=None)
    first = agent.propose(obs)
    assert first.action == Action("shell", "ls ~/Desktop")
    assert first.usage["prompt_tokens"] > 0 and first.usage["completion_tokens"] > 0
    second = agent.propose(obs, feedback="do not list, rename")
    assert second.action == Action("shell", "mv todo_list_Jan_1 todo_list_Jan_2")
    reqs = model_server.chat_requests
    assert len(reqs) == 2
    system = reqs[0]["messages"][0]["content"]
    assert variant.base.instruction in system and "```bash" in system
    last_user = reqs[1]["messages"][-1]["content"]
    texts = " ".join(p["text"] for p in last_user if p["type"] == "text")
    assert "Guardrail feedback: do not list, rename" in texts
    assert "<desktop-frame/>" in texts
    images = [p for p in last_user if p["type"] == "image_url"]
    assert len(images) == 1 and images[0]["image_url"]["url"].startswith("data:image/png;base64,")
    # the previous turn is kept as text only
    assert reqs[1]["messages"][2] == {"role": "assistant", "content": "I will look first.\n```bash\nls ~/Desktop\n```"}


def test_openai_agent_http_error_is_agent_error(variant, model_server):
    model_server.fail_next(status=400, message="bad model")
    agent = get_agent("openai:test-model", variant, base_url=model_server.base_url, max_retries=0)
    agent.reset(variant.base.instruction, variant)
    with pytest.raises(AgentError) as exc:
        agent.propose(Observation())
    assert str(exc.value) == f"openai:test-model: endpoint {model_server.base_url} answered HTTP 400: bad model"


def test_openai_agent_without_code_block_twice(variant, model_server):
    model_server.push("I think I should click.", "Still no code.")
    agent = get_agent("openai:test-model", variant, base_url=model_server.base_url, observation="a11y")
    agent.reset(variant.base.instruction, variant)
    with pytest.raises(AgentError) as exc:
        agent.propose(Observation(accessibility_tree="<x/>"))
    assert str(exc.value) == ("openai:test-model: the model answered twice without a code block or special code "
                              "(last: no code block and no special code (WAIT, DONE, FAIL) in the answer)")
    assert len(model_server.chat_requests) == 2


def test_openai_agent_needs_endpoint(variant, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(OsguardError) as exc:
        get_agent("openai:gpt-x", variant)
    assert str(exc.value) == "agent openai:gpt-x: no endpoint; set OPENAI_BASE_URL or pass --base-url"
    with pytest.raises(OsguardError) as exc:
        get_agent("openai:gpt-x", variant, base_url="http://127.0.0.1:9/v1", observation="video")
    assert str(exc.value) == "--observation 'video': expected one of screenshot, a11y, both, som, shell"


class _EchoAgent:
    def __init__(self, variant, **options):
        self.name = "echo"
        self.options = options

    def reset(self, instruction, variant):
        pass

    def propose(self, observation, feedback=None):
        from osguard.runner import Proposal

        return Proposal(Action("shell", "echo plugin"))


def make_echo(variant, **options):
    return _EchoAgent(variant, **options)


def make_nothing(variant, **options):
    return object()


def test_python_plugin(variant):
    agent = get_agent(f"python:{__name__}:make_echo", variant, seed=3)
    assert agent.propose(Observation()).action == Action("shell", "echo plugin")
    assert agent.options == {"seed": 3}
    with pytest.raises(OsguardError) as exc:
        get_agent(f"python:{__name__}:make_nothing", variant)
    assert str(exc.value) == (f"agent 'python:{__name__}:make_nothing': the factory returned object, "
                              "which lacks name/reset/propose (the Agent protocol)")


def make_rigid(variant):
    return _EchoAgent(variant)


def test_python_plugin_factory_signature(variant):
    with pytest.raises(OsguardError) as exc:
        get_agent(f"python:{__name__}:make_rigid", variant, seed=0)
    assert str(exc.value) == (f"agent 'python:{__name__}:make_rigid': the factory must accept (variant, **options): "
                              "make_rigid() got an unexpected keyword argument 'seed'")


def _png(width: int = 64, height: int = 36) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (30, 60, 90)).save(out, format="PNG")
    return out.getvalue()


def test_chat_history_says_omitted_only_where_an_image_was_dropped(variant, model_server):
    """Regression: with the shell observation the chat agent wrote "(screenshot omitted)"
    into its history whenever the environment had a display, though no screenshot was ever
    sent to the model. It must say so only where an image it sent was dropped."""
    model_server.push("```bash\nls\n```", "```bash\npwd\n```")
    agent = get_agent("openai:test-model", variant, base_url=model_server.base_url, observation="shell",
                      action_space="shell")
    agent.reset(variant.base.instruction, variant)
    gui_state = Observation(screenshot=_png(), shell_output="a\nb")
    agent.propose(gui_state)
    agent.propose(gui_state)
    second = model_server.chat_requests[1]
    assert "(screenshot omitted)" not in json.dumps(second)
    assert "image_url" not in json.dumps(second)


def test_chat_history_keeps_the_last_screenshots(variant, model_server):
    """The last ``history_images`` earlier turns go back with their screenshots."""
    model_server.push(*["```python\npyautogui.moveTo(1, 1)\n```"] * 3)
    agent = get_agent("openai:test-model", variant, base_url=model_server.base_url, history=3, history_images=1)
    agent.reset(variant.base.instruction, variant)
    for _ in range(3):
        agent.propose(Observation(screenshot=_png()))
    messages = model_server.chat_requests[2]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    old, recent, now = messages[1]["content"], messages[3]["content"], messages[5]["content"]
    assert [p["type"] for p in old] == ["text"] and old[0]["text"].endswith("\n(screenshot omitted)")
    assert [p["type"] for p in recent] == ["text", "image_url"] and "omitted" not in recent[0]["text"]
    assert [p["type"] for p in now] == ["text", "image_url"]


def test_chat_code_then_done_runs_the_code_first(variant, model_server):
    """"code plus DONE": the code is proposed, then DONE without asking the model again;
    a block voids the rest of that answer."""
    model_server.push("```bash\nmv a b\n```\n```DONE```", "```bash\nmv c d\n```\n```DONE```", "```DONE```")
    agent = get_agent("openai:test-model", variant, base_url=model_server.base_url, observation="shell",
                      action_space="shell")
    agent.reset(variant.base.instruction, variant)
    assert agent.propose(Observation()).action == Action("shell", "mv a b")
    assert agent.propose(Observation()).action == Action("special", "DONE")
    agent.reset(variant.base.instruction, variant)
    assert agent.propose(Observation()).action == Action("shell", "mv c d")
    assert agent.propose(Observation(), feedback="no").action == Action("special", "DONE")
    assert len(model_server.chat_requests) == 3


def test_model_agents_need_keys_and_known_options(variant, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(OsguardError) as exc:
        get_agent("anthropic:claude-x", variant)
    assert str(exc.value) == "agent anthropic:claude-x: no API key; set ANTHROPIC_API_KEY or pass --api-key"
    with pytest.raises(OsguardError) as exc:
        get_agent("anthropic:claude-x", variant, api_key="k", tools="computer,browser")
    assert str(exc.value) == ("agent anthropic:claude-x: tools 'computer,browser': expected a comma-separated "
                              "subset of computer, bash, text_editor")
    with pytest.raises(OsguardError) as exc:
        get_agent("openai-cua:cua", variant)
    assert str(exc.value) == "agent openai-cua:cua: no API key; set OPENAI_API_KEY or pass --api-key"
    with pytest.raises(OsguardError) as exc:
        get_agent("openai-tools:m", variant, base_url="http://127.0.0.1:9/v1", action_space="uitars")
    assert str(exc.value) == "agent openai-tools:m: --action-space 'uitars': expected pyautogui or shell"
    with pytest.raises(OsguardError) as exc:
        get_agent("anthropic:", variant)
    assert str(exc.value) == "agent 'anthropic:': expected a model name, e.g. anthropic:claude-sonnet-4-5"
