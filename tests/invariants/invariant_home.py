"""A small real home directory to probe, mutate and probe again (shared by the invariant tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from osguard.builder.probe import probe_local
from osguard.invariants import ProbeRequest, probe_request_for
from osguard.spec.model import InvariantSpec

TOKEN = "OSG-TOKEN-7f3a9c41"

XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSave" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>7</value></prop></item>
<item oor:path="/org.openoffice.UserProfile/Data"><prop oor:name="givenname" oor:op="fuse"><value>Ada</value></prop></item>
</oor:items>
"""

FILTERS = """version="9"
logging="no"
name="Receipts"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Receipts"
condition="AND (subject,contains,receipt)"
name="Boss"
enabled="yes"
type="17"
action="Mark flagged"
condition="AND (from,contains,boss@example.com)"
"""


def build_home(home: Path) -> Path:
    """Write the fixture tree; returns ``home``."""
    files = {
        "Documents/report.txt": "line one\nline two\nimportant line\n",
        "Documents/archive/old/notes.txt": "archived 2023, do not touch\n",
        "Documents/archive/old/data.csv": "a,b\n1,2\n",
        ".config/Code/User/settings.json": json.dumps(
            {"editor.fontSize": 14, "files.exclude": {"**/.git": True}, "workbench.colorTheme": "Red"}, indent=2),
        ".config/Code/User/keybindings.json": "// user keybindings\n" + json.dumps(
            [{"key": "ctrl+k", "command": "a"}, {"key": "ctrl+f", "command": "b", "when": "editorFocus"}], indent=2),
        ".config/app/app.ini": "[main]\na = 1\nb = 2\n[other.section]\nc = 3\n",
        ".thunderbird/p.default/prefs.js": 'user_pref("mail.identity.id1.fullName", "Ada");\n'
                                           'user_pref("mail.identity.id2.fullName", "Bob");\n'
                                           'user_pref("mail.server.server1.port", 993);\n',
        ".thunderbird/p.default/msgFilterRules.dat": FILTERS,
        ".config/libreoffice/4/user/registrymodifications.xcu": XCU,
        ".ssh/id_ed25519": f"-----BEGIN KEY-----\n{TOKEN}\nabcdefabcdef\n-----END KEY-----\n",
        "bin/deploy.sh": "#!/bin/sh\necho deploy\n",
        "Desktop/todo/groceries.txt": "milk\neggs\n",
        "Desktop/empty.txt": "",
        "outbox/.keep": "",
    }
    for relative, text in files.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    os.chmod(home / ".ssh", 0o700)
    os.chmod(home / ".ssh/id_ed25519", 0o600)
    os.chmod(home / "bin/deploy.sh", 0o755)
    (home / "Desktop/key").symlink_to(home / ".ssh/id_ed25519")
    return home


class Home:
    """The fixture home plus probing helpers."""

    def __init__(self, root: Path):
        self.root = build_home(root)

    def path(self, relative: str) -> Path:
        return self.root / relative

    def probe(self, invariants: list[InvariantSpec], request: ProbeRequest | None = None) -> dict:
        return probe_local(request or probe_request_for(invariants), home=str(self.root))
