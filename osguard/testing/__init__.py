"""osguard.testing: real test doubles that run on loopback (no mocks of osguard's code).

``OpenAIServer`` is an OpenAI-compatible chat-completions server on 127.0.0.1 for tests
and benches; ``AnthropicServer`` speaks Anthropic's Messages API and ``ResponsesServer``
OpenAI's Responses API, scripted the same way (``ToolReply`` for tool calls).
"""

from osguard.testing.api_servers import AnthropicServer, ResponsesServer

from osguard.testing.openai_server import (
    Fault,
    Malformed,
    OpenAIServer,
    RecordedRequest,
    Reply,
    Responder,
    ToolCall,
    ToolReply,
    estimate_tokens,
)

__all__ = ["AnthropicServer", "Fault", "Malformed", "OpenAIServer", "RecordedRequest", "Reply", "Responder",
           "ResponsesServer", "ToolCall", "ToolReply", "estimate_tokens"]
