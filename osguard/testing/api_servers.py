"""Loopback servers for the other model APIs agents speak, scripted like ``OpenAIServer``
(same queue, responder, faults and request records; ``bodies`` are the API requests):

- ``AnthropicServer``: ``POST /v1/messages`` (Anthropic's Messages API with tool use);
  a ``str`` reply is a text block (``end_turn``), a ``ToolReply`` ``tool_use`` blocks
  (``stop_reason: tool_use``). Like the real API it refuses (HTTP 400) a request whose
  ``tool_use`` blocks are not each answered by a ``tool_result`` at the start of the next
  user message, and a request without the ``x-api-key`` (when ``api_key`` is set).
- ``ResponsesServer``: ``POST /v1/responses`` (OpenAI's Responses API); a ``ToolReply``
  call named ``computer`` becomes a ``computer_call`` (its arguments the ``action``),
  others ``function_call`` items. It keeps each response's calls and refuses a request
  whose ``previous_response_id`` is unknown or leaves one of its calls without output.
  As the conversation lives on the server, a request's ``input_tokens`` count the
  previous response's context (its input and output tokens) plus the new input.

Usage tokens come from the request as received (``osguard.testing.tokens``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from osguard.testing.openai_server import OpenAIServer, ToolReply, estimate_tokens


class AnthropicServer(OpenAIServer):
    """A scriptable Anthropic Messages API on 127.0.0.1 (``base_url`` without ``/v1``)."""

    route = "/v1/messages"

    @property
    def base_url(self) -> str:  # type: ignore[override]
        """The URL to give an Anthropic client (the API root; requests go to /v1/messages)."""
        return f"http://127.0.0.1:{self.port}"

    def _authorized(self, headers: dict[str, str]) -> bool:
        return self.api_key is None or headers.get("x-api-key") == self.api_key

    def _check(self, payload: Any) -> str | None:
        if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
            return "messages: Field required"
        if not isinstance(payload.get("max_tokens"), int):
            return "max_tokens: Field required"
        messages = payload["messages"]
        for i, message in enumerate(messages):
            content = message.get("content")
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            ids = [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            if not ids:
                continue
            after = messages[i + 1] if i + 1 < len(messages) else None
            blocks = after.get("content") if after and after.get("role") == "user" else None
            results = []
            for block in blocks if isinstance(blocks, list) else []:
                if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                    break
                results.append(block.get("tool_use_id"))
            missing = [x for x in ids if x not in results]
            if missing and after is not None:
                return (f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                        f"after: {', '.join(map(str, missing))}. Each `tool_use` block must have a corresponding "
                        "`tool_result` block in the next message.")
        return None

    def _answer(self, request_json: dict[str, Any], reply: "str | ToolReply") -> dict[str, Any]:
        from osguard.testing.tokens import anthropic_request_tokens

        content: list[dict[str, Any]] = []
        text = reply.text if isinstance(reply, ToolReply) else reply
        if text:
            content.append({"type": "text", "text": text})
        if isinstance(reply, ToolReply):
            content += [{"type": "tool_use", "id": f"toolu_osguard_{next(self._ids)}", "name": c.name,
                         "input": c.arguments} for c in reply.calls]
        tool_use = isinstance(reply, ToolReply) and bool(reply.calls)
        return {
            "id": f"msg_osguard_{next(self._ids)}", "type": "message", "role": "assistant",
            "model": str(request_json.get("model", "test-model")), "content": content,
            "stop_reason": "tool_use" if tool_use else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": anthropic_request_tokens(request_json),
                      "output_tokens": estimate_tokens(json.dumps(content))},
        }


class ResponsesServer(OpenAIServer):
    """A scriptable OpenAI Responses API on 127.0.0.1 (``base_url`` ends with ``/v1``)."""

    route = "/v1/responses"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._calls: dict[str, list[str]] = {}  # response id -> call ids it made
        self._context: dict[str, int] = {}  # response id -> tokens of the conversation after it

    def _check(self, payload: Any) -> str | None:
        if not isinstance(payload, dict) or "input" not in payload:
            return "Missing required parameter: 'input'."
        previous = payload.get("previous_response_id")
        if previous is None:
            return None
        with self._lock:
            calls = self._calls.get(str(previous))
        if calls is None:
            return f"Previous response with id '{previous}' not found."
        items = payload["input"] if isinstance(payload["input"], list) else []
        answered = {i.get("call_id") for i in items if isinstance(i, dict)
                    and i.get("type") in ("computer_call_output", "function_call_output")}
        for call_id in calls:
            if call_id not in answered:
                return f"No tool output found for computer call {call_id}."
        return None

    def _answer(self, request_json: dict[str, Any], reply: "str | ToolReply") -> dict[str, Any]:
        from osguard.testing.tokens import openai_request_tokens

        output: list[dict[str, Any]] = []
        text = reply.text if isinstance(reply, ToolReply) else reply
        if text:
            output.append({"type": "message", "id": f"msg_osguard_{next(self._ids)}", "role": "assistant",
                           "status": "completed",
                           "content": [{"type": "output_text", "text": text, "annotations": []}]})
        call_ids: list[str] = []
        for call in reply.calls if isinstance(reply, ToolReply) else ():
            call_id = f"call_osguard_{next(self._ids)}"
            call_ids.append(call_id)
            if call.name == "computer":
                output.append({"type": "computer_call", "id": f"cu_osguard_{next(self._ids)}", "call_id": call_id,
                               "action": call.arguments, "pending_safety_checks": [], "status": "completed"})
            else:
                output.append({"type": "function_call", "id": f"fc_osguard_{next(self._ids)}", "call_id": call_id,
                               "name": call.name, "arguments": json.dumps(call.arguments), "status": "completed"})
        response_id = f"resp_osguard_{next(self._ids)}"
        output_tokens = estimate_tokens(json.dumps(output))
        with self._lock:
            before = self._context.get(str(request_json.get("previous_response_id")), 0)
            input_tokens = before + openai_request_tokens(request_json)
            self._calls[response_id] = call_ids
            self._context[response_id] = input_tokens + output_tokens
        return {
            "id": response_id, "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": str(request_json.get("model", "test-model")), "output": output,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens},
        }
