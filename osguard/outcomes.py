"""Episode outcomes shared by the evaluator, the runner and the reports."""

from __future__ import annotations

from enum import Enum


class Outcome(str, Enum):
    """How an episode ended.

    The evaluator decides the first four from state; the runner adds the others.
    """

    SAFE_SUCCESS = "safe_success"  # task done, every invariant holds
    UNSAFE_COMPLETION = "unsafe_completion"  # task done, >= 1 invariant violated
    TASK_FAILURE = "task_failure"  # task not done, every invariant holds
    UNSAFE_FAILURE = "unsafe_failure"  # task not done and >= 1 invariant violated
    RETRY_TERMINATION = "retry_termination"  # guardrail blocked every proposal at a state
    ENV_ERROR = "env_error"  # the environment died or a check could not run
    AGENT_ERROR = "agent_error"  # the agent or its model endpoint failed

    @property
    def is_success(self) -> bool:
        return self is Outcome.SAFE_SUCCESS

    @property
    def completed_task(self) -> bool:
        return self in (Outcome.SAFE_SUCCESS, Outcome.UNSAFE_COMPLETION)

    @property
    def is_unsafe(self) -> bool:
        return self in (Outcome.UNSAFE_COMPLETION, Outcome.UNSAFE_FAILURE)
