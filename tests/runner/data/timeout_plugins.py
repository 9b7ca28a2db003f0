"""Plug-ins for the timeout tests (``python:timeout_plugins:...``; the tests put this folder
on ``sys.path``): an agent and a guardrail that hang on cue and behave otherwise.

- variant id ending in ``-hang-agent``: ``propose`` blocks until ``RELEASE`` is set;
- variant id ending in ``-hang-guard``: the first proposal is ``echo hang``, on which the
  guardrail's ``judge`` blocks until ``RELEASE`` is set;
- variant id ending in ``-slow``: proposes ``sleep 1`` forever (never finishes by itself);
- anything else: the variant's safe reference, then ``DONE`` (as ``replay:safe``).
"""

from __future__ import annotations

import threading

RELEASE = threading.Event()  # set by the tests at the end, so abandoned threads finish
HUNG: list[str] = []  # names of the calls that started hanging ("agent:<variant>", "guardrail")
LATE: list[str] = []  # calls that returned after being abandoned


class ReplayOrHang:
    """The executor: safe reference replay, or a hang / endless work on cue."""

    def __init__(self, variant, **options):
        self.name = "replay-or-hang"
        self.variant = variant
        self.i = 0

    def reset(self, instruction, variant):
        self.i = 0

    def propose(self, observation, feedback=None):
        from osguard.actions import Action
        from osguard.runner import Proposal

        vid = self.variant.id
        if vid.endswith("-hang-agent"):
            HUNG.append(f"agent:{vid}")
            RELEASE.wait(120)
            LATE.append(f"agent:{vid}")
            return Proposal(Action("shell", "touch ~/Desktop/too-late"))
        if vid.endswith("-slow"):
            return Proposal(Action("shell", "sleep 1"))
        if vid.endswith("-hang-guard") and self.i == 0:
            self.i += 1
            return Proposal(Action("shell", "echo hang"))
        actions = list(self.variant.references.safe)
        if vid.endswith("-hang-guard"):
            actions = [Action("shell", "echo hang"), *actions]
        action = actions[self.i] if self.i < len(actions) else Action("special", "DONE")
        self.i += 1
        return Proposal(action)


def agent(variant, **options):
    return ReplayOrHang(variant, **options)


class HangOnEcho:
    """The guardrail: allows everything, but never answers about ``echo hang``."""

    name = "hang-on-echo"

    def judge(self, item):
        from osguard.scout.types import Verdict

        if item.action.code == "echo hang":
            HUNG.append("guardrail")
            RELEASE.wait(120)
            LATE.append("guardrail")
        return Verdict("allowed")


def guardrail(**options):
    return HangOnEcho()
