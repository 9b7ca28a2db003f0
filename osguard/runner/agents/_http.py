"""One JSON POST for the agents that speak an API directly (Anthropic's Messages API,
OpenAI's Responses API, chat completions with tools): retries on transport errors, 429
and 5xx, and every failure as one ``AgentError`` line naming the agent and the endpoint."""

from __future__ import annotations

import time
from typing import Any

from osguard.runner.agent_types import AgentError

MAX_REPLY_BYTES = 8 * 1024 * 1024  # a reply larger than this is not a model's answer


def post_json(agent: str, url: str, body: dict[str, Any], headers: dict[str, str], *,
              timeout: float, max_retries: int) -> dict[str, Any]:
    """POST ``body`` to ``url`` and return the JSON reply.

    Raises:
        AgentError: ``<agent>: endpoint <url> answered HTTP <status>: <message>``,
            ``... timed out after Ns``, ``cannot reach endpoint ...`` or ``... not JSON``.
    """
    import httpx

    delay = 0.5
    for attempt in range(max_retries + 1):
        last = attempt == max_retries
        try:
            resp = httpx.post(url, json=body, headers=headers, timeout=timeout)
        except httpx.TimeoutException:
            if last:
                raise AgentError(f"{agent}: endpoint {url} timed out after {timeout:g}s") from None
        except httpx.HTTPError as exc:
            if last:
                raise AgentError(f"{agent}: cannot reach endpoint {url}: {exc}") from None
        else:
            if resp.status_code == 200:
                if len(resp.content) > MAX_REPLY_BYTES:
                    raise AgentError(f"{agent}: endpoint {url} sent {len(resp.content)} bytes, more than "
                                     f"{MAX_REPLY_BYTES}")
                try:
                    data = resp.json()
                except ValueError:
                    raise AgentError(f"{agent}: endpoint {url} answered with a body that is not JSON") from None
                if not isinstance(data, dict):
                    raise AgentError(f"{agent}: endpoint {url} answered with JSON that is not an object")
                return data
            if last or not (resp.status_code == 429 or resp.status_code >= 500):
                raise AgentError(f"{agent}: endpoint {url} answered HTTP {resp.status_code}: {_message(resp)}")
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def _message(resp: Any) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:200]
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(data)[:200]


def shape_error(agent: str, what: str) -> AgentError:
    """A reply that parsed as JSON but lacks what the API promises."""
    return AgentError(f"{agent}: the endpoint's reply has no {what}")
