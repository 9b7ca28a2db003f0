"""Measurement: what each agent dialect costs in tokens per step on a recorded run.

Every agent runs the same scripted episode (three pointer moves, or three shell commands
for the shell space, then the end) on the ``local`` sandbox (1920x1080 display) against
osguard's loopback server for its API. The prompt tokens are the server's ``usage``,
computed from each request as received (``osguard.testing.tokens``: text at four
characters per token, images by their pixel size with OpenAI's tile rule or Anthropic's
w*h/750); completion tokens are the scripted answers' size. Numbers are deterministic
for a given osguard version and screen size; real tokenizers differ by model.

Usage: .venv/bin/python bench/bench_agent_tokens.py [--write docs/agent-tokens.md]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from osguard.runner import run_suite
from osguard.spec import load_suite
from osguard.testing import AnthropicServer, OpenAIServer, ResponsesServer, ToolReply

REPO = Path(__file__).resolve().parents[1]
VARIANT = REPO / "tests" / "runner" / "data" / "suite" / "rt-rename-todo.yaml"


def _code(i: int) -> str:
    return f"Moving the pointer.\n```python\npyautogui.moveTo({100 * i}, 100)\n```"


CASES = [
    # label, agent spec, server class, options, scripted replies
    ("anthropic (computer tool)", "anthropic:claude-sonnet-4-5", AnthropicServer, {"api_key": "k"},
     [ToolReply.of(("computer", {"action": "mouse_move", "coordinate": [100 * i, 100]})) for i in (1, 2, 3)] + ["Done."]),
    ("openai-cua", "openai-cua:computer-use-preview", ResponsesServer, {"api_key": "k"},
     [ToolReply.of(("computer", {"type": "move", "x": 100 * i, "y": 100})) for i in (1, 2, 3)] + ["Done."]),
    ("openai-tools (GUI functions)", "openai-tools:qwen2.5-vl-72b", OpenAIServer, {},
     [ToolReply.of(("move_mouse", {"x": 100 * i, "y": 100})) for i in (1, 2, 3)] + [ToolReply.of(("done", {}))]),
    ("openai pyautogui + screenshot", "openai:gpt-4o", OpenAIServer, {"observation": "screenshot"},
     [_code(i) for i in (1, 2, 3)] + ["```DONE```"]),
    ("openai pyautogui + both (a11y)", "openai:gpt-4o", OpenAIServer, {"observation": "both"},
     [_code(i) for i in (1, 2, 3)] + ["```DONE```"]),
    ("openai pyautogui + som", "openai:gpt-4o", OpenAIServer, {"observation": "som"},
     [_code(i) for i in (1, 2, 3)] + ["```DONE```"]),
    ("openai computer_13 + screenshot", "openai:gpt-4o", OpenAIServer, {"action_space": "computer_13"},
     ['```json\n{"action_type": "MOVE_TO", "x": %d, "y": 100}\n```' % (100 * i) for i in (1, 2, 3)] + ["```DONE```"]),
    ("openai uitars", "openai:ui-tars-1.5-7b", OpenAIServer, {"action_space": "uitars"},
     [f"Thought: move\nAction: click(start_box='({100 * i},100)')" for i in (1, 2, 3)] + ["Thought: ok\nAction: finished()"]),
    ("openai qwen25vl", "openai:qwen2.5-vl-72b", OpenAIServer, {"action_space": "qwen25vl"},
     ['<tool_call>{"name": "computer_use", "arguments": {"action": "mouse_move", "coordinate": [%d, 100]}}</tool_call>'
      % (100 * i) for i in (1, 2, 3)]
     + ['<tool_call>{"name": "computer_use", "arguments": {"action": "terminate", "status": "success"}}</tool_call>']),
    ("openai shell + shell", "openai:gpt-4o", OpenAIServer, {"observation": "shell", "action_space": "shell"},
     ["```bash\nls ~/Desktop\n```"] * 3 + ["```DONE```"]),
]


def measure() -> list[tuple[str, list[dict[str, int]]]]:
    (variant,) = load_suite([str(VARIANT)])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, spec, server_cls, options, replies in CASES:
            with server_cls() as server:
                server.push(*replies)
                out = Path(tmp) / label.replace(" ", "_").replace("(", "").replace(")", "")
                summary = run_suite([variant], spec, out_dir=out, progress=False, max_steps=5,
                                    agent_options={"base_url": server.base_url, **options})
            result = summary.results[0]
            if result["outcome"] in ("agent_error", "env_error"):
                raise SystemExit(f"{label}: {result['outcome']}: {result['reason']}")
            steps = [json.loads(line) for line in (out / "episodes" / variant.id / "steps.jsonl").read_text().splitlines()]
            rows.append((label, [p["usage"] for s in steps for p in s["proposals"]]))
    return rows


def table(rows: list[tuple[str, list[dict[str, int]]]]) -> str:
    lines = ["| agent | prompt tokens, steps 1-4 | completion tokens, steps 1-4 | total for the episode |",
             "| --- | --- | --- | --- |"]
    for label, usages in rows:
        prompt = [u.get("prompt_tokens", 0) for u in usages]
        completion = [u.get("completion_tokens", 0) for u in usages]
        lines.append(f"| {label} | {' / '.join(map(str, prompt))} | {' / '.join(map(str, completion))} | "
                     f"{sum(prompt) + sum(completion)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    text = table(measure())
    print(text)
    if args.write:
        args.write.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
