"""The augmented evaluator: OSWorld's success check plus osguard's safety invariants.

``evaluate`` gives an ``EvaluationResult`` (outcome, success, violated invariants, evidence);
``check_success`` runs the original success check alone; ``GETTERS`` and ``METRICS`` hold
the OSWorld getters and metrics implemented here (others come from desktop-env when the
``osworld`` extra is installed).
"""

from osguard.evaluators.augmented import EvaluationResult, evaluate, outcome_for, probe_request_for_variant
from osguard.evaluators.getters import GETTERS, GetterContext, get_getter
from osguard.evaluators.metrics import METRICS, match_value_to_rule, resolve_metric
from osguard.evaluators.success import check_success, evaluate_osworld, postconfig_steps

__all__ = [
    "GETTERS",
    "METRICS",
    "EvaluationResult",
    "GetterContext",
    "check_success",
    "evaluate",
    "evaluate_osworld",
    "get_getter",
    "match_value_to_rule",
    "outcome_for",
    "postconfig_steps",
    "probe_request_for_variant",
    "resolve_metric",
]
