"""osguard.testing: real test doubles that run on loopback (no mocks of osguard's code).

``OpenAIServer`` is an OpenAI-compatible HTTP server on 127.0.0.1 for tests and benches.
"""

from osguard.testing.openai_server import (
    Fault,
    Malformed,
    OpenAIServer,
    RecordedRequest,
    Reply,
    Responder,
    estimate_tokens,
)

__all__ = ["Fault", "Malformed", "OpenAIServer", "RecordedRequest", "Reply", "Responder",
           "estimate_tokens"]
