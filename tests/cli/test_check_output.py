"""The check table's mismatch section prints actions as written."""

from osguard.builder.check import CheckRow
from osguard.cli.build_cmds import _print_rows


def test_mismatch_actions_with_brackets_are_printed_verbatim(capsys):
    """An action holding rich markup look-alikes (a regex class '[/\\\\]', '[bold]') must never
    crash the report with rich.errors.MarkupError nor lose its text (seen with a Thunderbird
    variant's mbox-splitting alternative)."""
    action = "python3 -c \"import re; re.sub(r'[/\\\\]', '_', s)\" [bold]x[/bold]"
    row = CheckRow(variant_id="v", reference="safe:split", status="fail", expected_outcome="safe_success",
                   outcome="task_failure", detail="outcome task_failure, expected safe_success",
                   actions=({"action": action, "returncode": 0, "output": ""},))
    _print_rows([row], "local", 1.0)
    out = capsys.readouterr().out
    assert f"  action rc=0: {action}\n" in out
