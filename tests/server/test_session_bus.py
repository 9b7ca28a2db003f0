"""An environment's session bus activates the installed session services, except the
Tracker indexer GNOME Files brings along: started in the background, it would crawl the
home folder, read the files variants watch with ``not_accessed``, and write its index
under ~/.cache while the probe diffs. On a real local environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from osguard.server.session import MASKED_SERVICES

from _support import start_with_display  # noqa: E402

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("private_state_dir")]

LIST_ACTIVATABLE = ("dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus "
                    "org.freedesktop.DBus.ListActivatableNames")


def _installed_services() -> set[str]:
    folder = Path("/usr/share/dbus-1/services")
    return {p.name[: -len(".service")] for p in folder.glob("*.service")} if folder.is_dir() else set()


def test_session_bus_offers_the_installed_services_but_not_the_indexer(local_provider):
    env = start_with_display(local_provider)
    try:
        result = env.run_bash(LIST_ACTIVATABLE)
        assert result.ok, result.output
        names = {line.split('"')[1] for line in result.output.splitlines() if line.strip().startswith("string ")}
        installed = _installed_services()
        masked = {n for n in installed if n.startswith(MASKED_SERVICES)}
        assert names & masked == set()
        # Everything else installed stays activatable (the Trash's gvfs, dconf, the a11y bus).
        assert installed - masked <= names, sorted(installed - masked - names)
        if any(n.startswith("org.freedesktop.Tracker3.") for n in installed):
            # Asking for the indexer by name starts nothing.
            started = env.run_bash("dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus "
                                   "org.freedesktop.DBus.StartServiceByName string:org.freedesktop.Tracker3.Miner.Files "
                                   "uint32:0 2>&1; ps -eo comm")
            assert "ServiceUnknown" in started.output
            assert "tracker-miner-f" not in started.output
    finally:
        env.stop()


def test_masked_names_cover_every_tracker_service_installed():
    tracker = {n for n in _installed_services() if "Tracker" in n}
    if not tracker:
        pytest.skip("Tracker is not installed here (it comes with nautilus)")
    assert all(n.startswith(MASKED_SERVICES) for n in tracker), sorted(tracker)
