"""GNOME Files (nautilus) in a real local environment: it opens a folder, searches its
subfolders and shows the hits in the accessibility tree, with the Tracker indexer masked
(tests/server/test_session_bus.py) and GTK 4 drawing with cairo. With GTK 4's default GL
renderer on llvmpipe its main thread spun under load: the search never showed its hits
and the window stopped answering the accessibility bus."""

from __future__ import annotations

import shutil
import time

import pytest

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("private_state_dir")]

HITS = ("hk_group_photo.jpg", "emnlp2023.jpg")

LABELS = """
import pyatspi
out = []
def walk(node, depth):
    if node.name:
        out.append(node.name)
    for i in range(node.childCount if depth < 40 else 0):
        walk(node.getChildAtIndex(i), depth + 1)
for app in pyatspi.Registry.getDesktop(0):
    if app is not None and app.name == 'org.gnome.Nautilus':
        walk(app, 0)
print('\\n'.join(out))
"""


def test_files_searches_subfolders_and_shows_the_hits(local_provider):
    if shutil.which("nautilus") is None:
        pytest.skip("GNOME Files is not installed here (apt install nautilus)")
    env = local_provider.start(timeout=120)
    try:
        if not env.capabilities.accessibility:
            pytest.skip("no accessibility tree here: " + "; ".join(env.capabilities.notes))
        assert env.run_bash("echo $GSK_RENDERER").output.strip() == "cairo"
        assert env.run_bash("mkdir -p ~/photos/trip ~/photos/events ~/other && "
                            "for f in photos/trip/hk_group_photo.jpg photos/events/emnlp2023.jpg other/elsewhere.jpg; "
                            "do printf 'x' > ~/$f; done").ok
        env.write_file("~/labels.py", LABELS.encode())
        env.launch(["nautilus", "--new-window", "/home/user/photos"])
        title = ""
        for _ in range(180):
            title = env.run_bash("xdotool getactivewindow getwindowname 2>/dev/null").output.strip()
            if title == "photos":
                break
            time.sleep(0.25)
        assert title == "photos"
        assert env.run_bash("python3 -c \"import pyautogui, time; pyautogui.hotkey('ctrl', 'f'); time.sleep(0.5); "
                            "pyautogui.write('jpg', interval=0.05)\"").ok
        labels: list[str] = []
        for _ in range(90):
            result = env.run_bash("timeout 20 python3 ~/labels.py")
            labels = result.output.splitlines()
            if all(hit in labels for hit in HITS):
                break
            time.sleep(0.5)
        assert all(hit in labels for hit in HITS), labels[-20:]
        assert "elsewhere.jpg" not in labels  # the search stays in the folder it started from
    finally:
        env.stop()
