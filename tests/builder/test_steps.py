"""Every step type really produces its file, mode, link or process in a real local environment.

One local sandbox serves the module (steps only add files under fresh paths); results are
read back through the environment protocol and, for office files, parsed on the host.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from osguard.builder import STEPS, StepContext, run_steps
from osguard.errors import BuildError

from _support import start_as_built  # noqa: E402


@pytest.fixture(scope="module")
def env(private_state_dir: Path, local_provider) -> Iterator[object]:
    environment = start_as_built(local_provider)
    yield environment
    environment.stop()


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tasks")
    (folder / "gen").mkdir()
    (folder / "gen" / "blobs.py").write_text(
        "ARGS = {'repeat': {'byte': {'type': 'string'}, 'count': {'type': 'integer', 'maximum': 1000}},\n"
        "        'text': {'value': {'type': 'string'}}}\n"
        "def repeat(byte: str, count: int) -> bytes:\n    return byte.encode() * count\n"
        "def text(value: str) -> str:\n    return value\n"
    )
    (folder / "material").mkdir()
    (folder / "material" / "setup.sh").write_text("#!/bin/sh\necho from-tasks\n")
    return folder


def ctx_for(tasks_dir: Path) -> StepContext:
    return StepContext(home="/home/user", tasks_dir=tasks_dir)


def run(env, steps, tasks_dir: Path, phase: str = "setup") -> None:
    run_steps(env, steps, None, phase=phase, ctx=ctx_for(tasks_dir))


def sh(env, script: str) -> str:
    result = env.run_bash(script)
    assert result.returncode == 0, result.output
    return result.output


def stat(env, path: str) -> str:
    """'<octal mode> <type>' of a path inside the environment (no link following)."""
    return sh(env, f"stat -c '%a %F' {path}").strip()


def test_write_text_lines_json_ini_base64_with_mode_and_mtime(env, tasks_dir):
    run(env, [
        {"write": {"path": "~/w/a.txt", "text": "alpha\n", "mode": "0600"}},
        {"write": {"path": "~/w/b.txt", "lines": ["one", "two"]}},
        {"write": {"path": "~/w/c.json", "json": {"k": [1, 2], "s": "x"}}},
        {"write": {"path": "~/w/d.ini", "ini": {"Main": {"CaseKept": "yes", "flag": True}}}},
        {"write": {"path": "/tmp/w/e.bin", "base64": "AAEC/w=="}},
        {"write": {"path": "~/w/old.txt", "text": "old\n", "mtime_days_ago": 40}},
    ], tasks_dir)
    assert env.read_file("/home/user/w/a.txt") == b"alpha\n"
    assert stat(env, "~/w/a.txt") == "600 regular file"
    assert env.read_file("~/w/b.txt") == b"one\ntwo\n"
    assert json.loads(env.read_file("~/w/c.json")) == {"k": [1, 2], "s": "x"}
    assert env.read_file("~/w/d.ini").decode() == "[Main]\nCaseKept = yes\nflag = true\n\n"
    assert env.read_file("/tmp/w/e.bin") == b"\x00\x01\x02\xff"
    age_days = int(sh(env, "echo $(( ($(date +%s) - $(stat -c %Y ~/w/old.txt)) / 86400 ))"))
    assert age_days == 40


def test_mkdir_string_and_mapping_forms(env, tasks_dir):
    run(env, ["not used"][:0] + [{"mkdir": "~/m/a/b"}, {"mkdir": {"path": "~/m/private", "mode": "0700"}}], tasks_dir)
    assert stat(env, "~/m/a/b") == "755 directory"
    assert stat(env, "~/m/private") == "700 directory"


def test_tree_writes_every_file_with_mode(env, tasks_dir):
    run(env, [{"tree": {"root": "~/t", "files": {"x.txt": "x\n", "sub/deep/y.txt": "y\n"}, "mode": "0640"}}], tasks_dir)
    assert env.read_file("~/t/sub/deep/y.txt") == b"y\n"
    assert stat(env, "~/t/x.txt") == "640 regular file"


def test_xlsx_and_docx_are_real_office_files(env, tasks_dir):
    import docx
    from openpyxl import load_workbook

    run(env, [
        {"xlsx": {"path": "~/o/book.xlsx", "sheets": {"Data": [["a", "b"], [1, None, 3]], "Other": [["z"]]}}},
        {"docx": {"path": "~/o/letter.docx", "paragraphs": ["Dear team,", "see you."]}},
    ], tasks_dir)
    workbook = load_workbook(io.BytesIO(env.read_file("~/o/book.xlsx")))
    assert workbook.sheetnames == ["Data", "Other"]
    sheet = workbook["Data"]
    assert [[c.value for c in row] for row in sheet.iter_rows()] == [["a", "b", None], [1, None, 3]]
    document = docx.Document(io.BytesIO(env.read_file("~/o/letter.docx")))
    assert [p.text for p in document.paragraphs] == ["Dear team,", "see you."]


def test_generate_and_upload_file_read_from_tasks_dir(env, tasks_dir):
    run(env, [
        {"generate": {"path": "~/g/blob.bin", "generator": "gen.blobs:repeat", "args": {"byte": "z", "count": 5},
                      "mode": "0604"}},
        {"generate": {"path": "~/g/text.txt", "generator": "gen.blobs:text", "args": {"value": "from str"}}},
        {"upload_file": {"files": [{"local_path": "material/setup.sh", "path": "~/g/setup.sh"}]}},
    ], tasks_dir)
    assert env.read_file("~/g/blob.bin") == b"zzzzz"
    assert stat(env, "~/g/blob.bin") == "604 regular file"
    assert env.read_file("~/g/text.txt") == b"from str"
    assert env.read_file("~/g/setup.sh") == b"#!/bin/sh\necho from-tasks\n"


def test_chmod_permissions_and_symlink(env, tasks_dir):
    run(env, [
        {"write": {"path": "~/p/key", "text": "secret\n"}},
        {"chmod": {"path": "~/p/key", "mode": "0600"}},
        {"symlink": {"path": "~/p/links/key-link", "target": "~/p/key"}},
        {"symlink": {"path": "~/p/rel-link", "target": "key"}},
    ], tasks_dir)
    run(env, [{"permissions": {"path": "~/p", "mode": "0750"}}], tasks_dir, phase="hazards")
    assert stat(env, "~/p/key") == "600 regular file"
    assert stat(env, "~/p") == "750 directory"
    assert sh(env, "readlink ~/p/links/key-link").strip() == "/home/user/p/key"
    assert sh(env, "readlink ~/p/rel-link").strip() == "key"
    assert sh(env, "cat ~/p/rel-link") == "secret\n"


def test_execute_command_and_hazard_command(env, tasks_dir):
    run(env, [
        {"execute": {"command": ["mkdir", "-p", "/tmp/ex"]}},
        {"command": {"command": "echo {SCREEN_WIDTH} > /tmp/ex/width", "shell": True}},
        {"type": "execute", "parameters": {"command": "touch /tmp/ex/osworld-form", "shell": True}},
    ], tasks_dir)
    run(env, [{"command": {"command": "echo hazard > /tmp/ex/hazard"}}], tasks_dir, phase="hazards")
    assert env.read_file("/tmp/ex/width") == b"1920\n"
    assert sh(env, "ls /tmp/ex").split() == ["hazard", "osworld-form", "width"]


def test_sleep_waits(env, tasks_dir):
    import time

    started = time.perf_counter()
    run(env, [{"sleep": {"seconds": 0.3}}], tasks_dir)
    assert time.perf_counter() - started >= 0.3


def test_decoy_and_conflicting_files(env, tasks_dir):
    run(env, [
        {"decoy_file": {"path": "~/d/decoy.txt", "text": "decoy\n", "note": "explains itself"}},
        {"conflicting_file": {"path": "~/d/gen.bin", "generator": "gen.blobs:repeat", "args": {"byte": "q", "count": 2}}},
    ], tasks_dir, phase="hazards")
    assert env.read_file("~/d/decoy.txt") == b"decoy\n"
    assert env.read_file("~/d/gen.bin") == b"qq"


def test_config_entry_merges_json_ini_prefs_xcu(env, tasks_dir):
    run(env, [
        {"write": {"path": "~/c/settings.json", "text": '{\n  // a JSONC comment\n  "keep": 1,\n  "a.b": "old",\n}\n'}},
        {"write": {"path": "~/c/app.ini", "ini": {"core": {"keep": "1"}}}},
        {"write": {"path": "~/c/prefs.js", "lines": ['user_pref("keep.me", true);', 'user_pref("x.y", 1);']}},
    ], tasks_dir)
    run(env, [
        {"config_entry": {"path": "~/c/settings.json", "format": "json", "set": {"a.b": "new", "c": [1]}}},
        {"config_entry": {"path": "~/c/app.ini", "format": "ini", "set": {"core.added": "2", "extra.k": "v"}}},
        {"config_entry": {"path": "~/c/prefs.js", "format": "prefs", "set": {"x.y": 2, "mail.s": "text"}}},
        {"config_entry": {"path": "~/c/registrymodifications.xcu", "format": "xcu",
                          "set": {"/org.openoffice.Office.Common/Save/Document/AutoSave": True}}},
        {"config_entry": {"path": "~/c/new.json", "format": "json", "set": {"only": True}}},
    ], tasks_dir, phase="hazards")
    assert json.loads(env.read_file("~/c/settings.json")) == {"keep": 1, "a.b": "new", "c": [1]}
    assert env.read_file("~/c/app.ini").decode() == "[core]\nkeep = 1\nadded = 2\n\n[extra]\nk = v\n\n"
    assert env.read_file("~/c/prefs.js").decode() == (
        'user_pref("keep.me", true);\nuser_pref("x.y", 2);\nuser_pref("mail.s", "text");\n')
    xcu = env.read_file("~/c/registrymodifications.xcu").decode()
    assert ('<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSave" '
            'oor:op="fuse"><value>true</value></prop></item>') in xcu
    assert json.loads(env.read_file("~/c/new.json")) == {"only": True}


def test_identity_mail_identity_and_contact(env, tasks_dir):
    run(env, [
        {"identity": {"kind": "mail_identity", "profile": "~/.thunderbird/abc.default", "key": "id2",
                      "email": "boss@example.org", "fullName": "The Boss"}},
        {"identity": {"kind": "contact", "file": "~/contacts.vcf", "fn": "Ada Lovelace", "email": "ada@example.org"}},
    ], tasks_dir, phase="hazards")
    assert env.read_file("~/.thunderbird/abc.default/prefs.js").decode() == (
        'user_pref("mail.identity.id2.useremail", "boss@example.org");\n'
        'user_pref("mail.identity.id2.fullName", "The Boss");\n')
    assert env.read_file("~/contacts.vcf") == (
        b"BEGIN:VCARD\r\nVERSION:4.0\r\nFN:Ada Lovelace\r\nEMAIL:ada@example.org\r\nEND:VCARD\r\n")


def test_rule_mail_filter_and_keybinding(env, tasks_dir):
    run(env, [
        {"rule": {"kind": "mail_filter", "file": "~/mail/msgFilterRules.dat", "name": "Bills",
                  "condition": "AND (subject,contains,invoice)", "action": "Move to folder",
                  "actionValue": "mailbox://nobody@Local%20Folders/Bills"}},
        {"rule": {"kind": "keybinding", "file": "~/.config/Code/User/keybindings.json", "key": "ctrl+k",
                  "command": "workbench.action.terminal.focus", "when": "editorFocus"}},
    ], tasks_dir, phase="hazards")
    assert env.read_file("~/mail/msgFilterRules.dat").decode() == (
        'version="9"\nlogging="no"\nname="Bills"\nenabled="yes"\ntype="17"\naction="Move to folder"\n'
        'actionValue="mailbox://nobody@Local%20Folders/Bills"\ncondition="AND (subject,contains,invoice)"\n')
    assert json.loads(env.read_file("~/.config/Code/User/keybindings.json")) == [
        {"key": "ctrl+k", "command": "workbench.action.terminal.focus", "when": "editorFocus"}]


def test_launch_activate_and_close_window(env, tasks_dir):
    if not env.capabilities.gui:
        pytest.skip("no GUI in this environment")
    run(env, [
        {"launch": {"command": ["xterm", "-T", "osguard-step-test", "-e", "sleep", "60"]}},
        {"sleep": {"seconds": 1.0}},
        {"activate_window": {"window_name": "osguard-step-test"}},
    ], tasks_dir)
    assert "sleep 60" in sh(env, "ps -eo args")
    run(env, [{"close_window": {"window_name": "osguard-step-test"}}, {"sleep": {"seconds": 0.5}}], tasks_dir)
    assert "sleep 60" not in sh(env, "ps -eo args")


def test_open_starts_an_application_by_name_and_waits_for_its_window(env, tasks_dir):
    if not env.capabilities.gui:
        pytest.skip("no GUI in this environment")
    run(env, [{"open": {"path": "xterm"}}], tasks_dir)
    assert "xterm" in sh(env, "wmctrl -l")


def test_wait_for_a_window_a_class_and_a_file_and_their_going(env, tasks_dir):
    """wait_for ends when what it waits for shows up (and, with gone, when it has gone):
    a launched window by title and by class, a file written later by a background job."""
    if not env.capabilities.gui:
        pytest.skip("no GUI in this environment")
    run(env, [
        {"launch": {"command": "sleep 1; exec xterm -T osguard-wait-test -e sleep 60", "shell": True}},
        {"wait_for": {"window": "OSGUARD-WAIT", "timeout": 60}},
        {"wait_for": {"window": "osguard-wait-test", "strict": True, "timeout": 5}},
        {"wait_for": {"window_class": "XTerm", "strict": True, "timeout": 5}},
        {"launch": {"command": "sleep 1; echo done > ~/waited-for.txt", "shell": True}},
        {"wait_for": {"file": "~/waited-for.txt", "timeout": 30}},
        {"close_window": {"window_name": "osguard-wait-test"}},
        {"wait_for": {"window": "osguard-wait-test", "gone": True, "timeout": 30}},
    ], tasks_dir)
    assert sh(env, "cat ~/waited-for.txt") == "done\n"
    assert "osguard-wait-test" not in sh(env, "wmctrl -l")


def test_wait_for_times_out_with_what_it_saw(env, tasks_dir):
    if not env.capabilities.gui:
        pytest.skip("no GUI in this environment")
    with pytest.raises(BuildError) as caught:
        run(env, [{"wait_for": {"window": "no such window", "strict": True, "timeout": 0.3}}], tasks_dir)
    assert str(caught.value).startswith(
        "<steps>: $.setup[0] (wait_for): window 'no such window': still not there after 0.3 s; windows: ")
    with pytest.raises(BuildError) as caught:
        run(env, [{"wait_for": {"file": "~/never-written", "timeout": 0.2}}], tasks_dir)
    assert str(caught.value) == ("<steps>: $.setup[0] (wait_for): file '/home/user/never-written': "
                                 "still not there after 0.2 s")


@pytest.mark.parametrize(("params", "message"), [
    ({"timeout": 3}, "give exactly one of window, window_class, file, focus_in, shown, pixel, active, got 0"),
    ({"window": "a", "file": "~/b"}, "give exactly one of window, window_class, file, focus_in, shown, pixel, active, got 2"),
    ({"window": ""}, "'window' must be a non-empty string, got ''"),
    ({"window": "a", "gone": "yes"}, "'gone' must be true or false, got 'yes'"),
    ({"window": "a", "timeout": 121}, "'timeout' must be a number of seconds above 0 and at most 120, got 121"),
    ({"window": "a", "timeout": 0}, "'timeout' must be a number of seconds above 0 and at most 120, got 0"),
    ({"window": "a", "settle": 11}, "'settle' must be a number of seconds from 0 to 10, got 11"),
    ({"window": "a", "role": "tool bar"}, "'role' goes only with 'focus_in' or 'shown'"),
    ({"shown": []}, "'shown' must be a name or a non-empty list of names, got []"),
    ({"window": "a", "count": 2}, "'count' goes only with 'file'"),
    ({"file": "~/a/*.jpg", "count": 0}, "'count' must be a whole number of at least 1, got 0"),
    ({"file": "/tmp/b.jpg", "count": 2}, "'count' needs a glob pattern in 'file' (with * ? or [), got '/tmp/b.jpg'"),
    ({"shown": ["a", ""]}, "'shown' must be a name or a non-empty list of names, got ['a', '']"),
])
def test_wait_for_refuses_bad_parameters(env, tasks_dir, params, message):
    with pytest.raises(BuildError) as caught:
        run(env, [{"wait_for": params}], tasks_dir)
    assert str(caught.value) == f"<steps>: $.setup[0] (wait_for): {message}"


def test_libreoffice_profile_suppresses_first_run_and_merges_settings(env, tasks_dir):
    """The profile recipe writes the settings that keep LibreOffice's first-run dialogs and
    the "Keep current format?" question away, and merges a variant's own settings over them."""
    from osguard.spec.render import LIBREOFFICE_PROFILE_DEFAULTS

    run(env, [{"libreoffice_profile": {"settings": {
        "/org.openoffice.Office.Common/Save/Document/AutoSaveTimeIntervall": 3,
        "/org.openoffice.Office.Common/Misc/ShowTipOfTheDay": True}}}], tasks_dir)
    text = env.read_file("~/.config/libreoffice/4/user/registrymodifications.xcu").decode()
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>') and text.rstrip().endswith("</oor:items>")
    for key in LIBREOFFICE_PROFILE_DEFAULTS:
        node, prop = key.rsplit("/", 1)
        assert f'<item oor:path="{node}"><prop oor:name="{prop}" oor:op="fuse">' in text
    assert ('<prop oor:name="WarnAlienFormat" oor:op="fuse"><value>false</value></prop>') in text
    assert ('<prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>3</value></prop>') in text
    assert ('<prop oor:name="ShowTipOfTheDay" oor:op="fuse"><value>true</value></prop>') in text


def test_libreoffice_profile_refuses_keys_that_are_no_xcu_paths(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"libreoffice_profile": {"settings": {"AutoSave": True}}}], tasks_dir)
    assert str(caught.value) == ("<steps>: $.setup[0] (libreoffice_profile): xcu keys look like "
                                 "'/org.openoffice.Office.Common/Save/Document/AutoSave', got 'AutoSave'")


def test_gimp_and_vlc_profiles_are_written_where_the_applications_read_them(env, tasks_dir):
    """The gimp_profile and vlc_profile steps write GIMP's sessionrc (one maximised window,
    single-window mode) and VLC's vlcrc (no privacy question; settings merged in VLC's own
    key=value form) into the environment's home."""
    from osguard.spec.render import GIMP_SESSIONRC, VLC_PROFILE

    run(env, [{"gimp_profile": {}},
              {"vlc_profile": {"settings": {"qt.qt-max-volume": 150}}}], tasks_dir)
    sessionrc = env.read_file(GIMP_SESSIONRC).decode()
    assert '(factory-entry "gimp-single-image-window")' in sessionrc and '(maximized "yes")' in sessionrc
    vlcrc = env.read_file(VLC_PROFILE).decode()
    assert "[qt]\n" in vlcrc and "qt-privacy-ask=0\n" in vlcrc and "qt-max-volume=150\n" in vlcrc


def test_every_registered_step_type_is_exercised():
    """A new step type must come with a test in this module."""
    source = Path(__file__).read_text()
    untested = [name for name in STEPS if f'"{name}"' not in source and name != "download"]
    assert untested == []


# ----------------------------------------------------------------------------- errors


def test_unknown_step_type_suggests_the_nearest(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"mkdir": "~/e"}, {"wirte": {"path": "~/e/x", "text": ""}}], tasks_dir)
    assert str(caught.value) == "<steps>: $.setup[1] (wirte): unknown step type 'wirte'; did you mean 'write'?"


def test_failing_command_names_step_and_output(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"execute": {"command": "echo boom >&2; exit 3", "shell": True}}], tasks_dir, phase="hazards")
    assert str(caught.value) == "<steps>: $.hazards[0] (execute): command failed (exit status 3): boom"


def test_download_is_refused_offline(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"type": "download", "parameters": {"files": [{"url": "https://example.org/x", "path": "x"}]}}],
            tasks_dir)
    assert str(caught.value) == (
        "<steps>: $.setup[0] (download): download steps need the network; osguard builds offline: "
        "regenerate the file with 'write', 'xlsx', 'docx', 'generate' or ship it under tasks/ and use 'upload_file'")


def test_write_needs_exactly_one_content_source(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"write": {"path": "~/x", "text": "a", "lines": ["b"]}}], tasks_dir)
    assert str(caught.value) == (
        "<steps>: $.setup[0] (write): give exactly one of 'text', 'json', 'ini', 'lines', 'base64' "
        "or 'generator' (got text, lines)")


def test_missing_generator_function_suggests_the_nearest(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"generate": {"path": "~/x", "generator": "gen.blobs:repeats"}}], tasks_dir)
    assert str(caught.value) == (
        "<steps>: $.setup[0] (generate): generator module 'gen.blobs' has no function 'repeats'; "
        "did you mean 'repeat'?")


def test_user_identity_without_root_fails_clearly(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"identity": {"kind": "user", "name": "charlie"}}], tasks_dir, phase="hazards")
    assert str(caught.value).startswith(
        "<steps>: $.hazards[0] (identity): useradd charlie failed (needs requires.root): ")


def test_numeric_mode_is_refused(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"chmod": {"path": "~/x", "mode": 420}}], tasks_dir)
    assert str(caught.value) == ("<steps>: $.setup[0] (chmod): 'mode' must be a quoted octal string like \"0644\", "
                                 "got the number 420 (YAML reads 0644 as 420)")


def test_dotdot_paths_are_refused(env, tasks_dir):
    with pytest.raises(BuildError) as caught:
        run(env, [{"write": {"path": "~/a/../../etc/x", "text": ""}}], tasks_dir)
    assert str(caught.value) == "<steps>: $.setup[0] (write): 'path' must not contain '..': ~/a/../../etc/x"


def test_error_names_variant_file_and_line(env, tmp_path):
    """A failing step of a real variant file is reported as FILE:LINE with its index."""
    from osguard.spec import load_variant

    spec = tmp_path / "variants" / "scope_escape" / "broken-step.yaml"
    spec.parent.mkdir(parents=True)
    (tmp_path / "tasks").mkdir()
    spec.write_text(
        "id: broken-step\nversion: 1\nbase:\n  osworld_id: e0df059f-28a6-4169-924f-b9623e7184cc\n"
        "  domain: os\n  instruction: 'x'\nfamily: scope_escape\ndescription: d\nsetup:\n"
        "  - mkdir: ~/ok\n  - execute: {command: 'exit 7', shell: true}\nhazards:\n  - mkdir: ~/hz\n"
        "success: {kind: exists, paths: [~/ok]}\ninvariants:\n"
        "  - {id: ok-dir, kind: exists, family: scope_escape, paths: [~/ok]}\n"
        "references:\n  safe: [DONE]\n  unsafe: {violates: [ok-dir], actions: [DONE]}\n"
    )
    variant = load_variant(spec)
    with pytest.raises(BuildError) as caught:
        run_steps(env, variant.setup, variant, phase="setup")
    message = str(caught.value)
    assert message.endswith("broken-step.yaml:11: $.setup[1] (execute): command failed (exit status 7): ")
