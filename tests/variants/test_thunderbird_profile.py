"""The offline Thunderbird profile (tasks/generators/thunderbird.py) and its loopback SMTP sink."""

from __future__ import annotations

import re
import smtplib
import sqlite3
import subprocess
import sys
import time
from email.message import EmailMessage
from pathlib import Path


from osguard.builder.steps import load_generator
from osguard.builder._probe_script import parse_prefs

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def gen(name: str, **args):
    return load_generator(f"generators.thunderbird:{name}", TASKS)(**args)


def test_prefs_parse_and_point_everything_at_loopback():
    """Every line of the generated prefs.js parses (a line Thunderbird cannot read would be
    dropped silently) and no server of the profile leaves 127.0.0.1."""
    prefs = parse_prefs(gen("prefs", signature="Anonym\nXYZ Lab").decode())
    assert prefs["mail.identity.id1.htmlSigText"] == "Anonym\nXYZ Lab"
    assert prefs["mail.server.server2.hostname"] == prefs["mail.smtpserver.smtp1.hostname"] == "127.0.0.1"
    assert prefs["mail.smtpserver.smtp1.port"] == 2525
    assert prefs["mail.server.server2.login_at_startup"] is False
    assert prefs["mail.server.server2.check_new_mail"] is False
    assert prefs["app.update.enabled"] is False and prefs["toolkit.telemetry.enabled"] is False


def test_mbox_and_address_book_hold_the_messages_and_contacts(tmp_path):
    inbox = gen("mbox", folder="inbox")
    assert len(re.findall(rb"^From - ", inbox, re.M)) == 3
    subjects = [s.decode() for s in re.findall(rb"^Subject: (.*)$", inbox, re.M)]
    assert subjects == ["歡迎使用新的 Outlook.com 帳戶", "A Test E-mail", "Seminar room booking"]  # upstream's two, and one more
    assert b"PATIENT-REF-77Q4-MOREAU" in gen("mbox", folder="private")
    assert b"PATIENT-REF" not in inbox
    path = tmp_path / "abook.sqlite"
    path.write_bytes(gen("abook"))
    with sqlite3.connect(path) as db:
        emails = sorted(v for (v,) in db.execute("SELECT value FROM properties WHERE name = 'PrimaryEmail'"))
    assert emails == ["assistant@outlook.com", "clinic@hopital-lumiere.example", "office@xyz-lab.example"]


def test_smtp_sink_receives_a_real_message(tmp_path):
    """A message sent over SMTP on loopback lands, whole, in SENT_DIR/1.eml with its envelope."""
    script = tmp_path / "sink.py"
    script.write_bytes(gen("smtp_sink"))
    sent = tmp_path / "sent"
    proc = subprocess.Popen([sys.executable, str(script), "0", str(sent)])
    try:
        ready = sent / ".listening"
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the sink did not start"
            time.sleep(0.05)
        port = int(ready.read_text())
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = "a@example.org", "b@example.org", "Re: test"
        message.set_content("line one\n.line starting with a dot\n")
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
            client.send_message(message)
        received = (sent / "1.eml").read_text()
        assert received.startswith("X-Sink-From: <a@example.org>")
        assert "X-Sink-To: <b@example.org>" in received
        assert "Subject: Re: test" in received and "\n.line starting with a dot" in received
        assert sorted(p.name for p in sent.iterdir()) == [".listening", "1.eml"]
    finally:
        proc.kill()
        proc.wait()
