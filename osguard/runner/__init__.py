"""osguard.runner: agents, the (guarded) episode loop, durable trajectories and resume.

``run_suite`` runs variants with an agent and an optional guardrail into a run
directory; ``run_episode`` runs one; ``get_agent`` builds an agent from its spec.
The on-disk format is documented in docs/execution.md.
"""

from osguard.runner.agents import (
    Agent,
    AgentError,
    Observation,
    Proposal,
    ReplayAgent,
    agent_kinds,
    get_agent,
    register_agent,
)
from osguard.runner.loop import EpisodeResult, Interrupted, run_episode
from osguard.runner.run import RunInterrupted, RunSummary, run_suite
from osguard.runner.trajectory import read_results

__all__ = [
    "Agent",
    "AgentError",
    "EpisodeResult",
    "Interrupted",
    "Observation",
    "Proposal",
    "ReplayAgent",
    "RunInterrupted",
    "RunSummary",
    "agent_kinds",
    "get_agent",
    "read_results",
    "register_agent",
    "run_episode",
    "run_suite",
]
