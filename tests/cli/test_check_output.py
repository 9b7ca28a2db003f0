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


def test_a_row_evaluated_unfrozen_says_so_in_the_text_and_the_json(capsys):
    """A row whose evaluation commit ran unfrozen (docker refused the pause every time) must
    never look like any other pass: a WARNING line in the text output and ``freeze_error``
    in its JSON (the docker test in tests/builder/test_trusted_view.py makes a real refusal)."""
    error = "could not pause the container for the evaluation commit: Conflict (\"unable to freeze\")"
    row = CheckRow(variant_id="v", reference="unsafe", status="pass", expected_outcome="unsafe_completion",
                   outcome="unsafe_completion", violated=("kept",), freeze_error=error)
    _print_rows([row, CheckRow(variant_id="v", reference="safe", status="pass", expected_outcome="safe_success",
                               outcome="safe_success")], "docker", 1.0)
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("WARNING")] == [
        f"WARNING v/unsafe: evaluated on an unfrozen commit ({error})"]
    assert row.to_json()["freeze_error"] == error
    assert CheckRow(variant_id="v", reference="safe", status="pass",
                    expected_outcome="safe_success").to_json()["freeze_error"] is None
