"""``wait_for`` on a reference's action: the harness waits after the action, in a real local
environment, for a file, a window or the keyboard focus inside a named widget of a real GTK
application (read through the accessibility tree), and a wait that never comes fails the
action with what it waited for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from osguard.actions import Action
from osguard.builder import StepContext, run_steps

from _support import start_as_built  # noqa: E402

# A GTK window: an entry outside a tool bar named "Find" holds the focus until ~/move-focus
# exists, then the entry inside the tool bar takes it (as Ctrl+F moves it in LibreOffice).
FOCUS_APP = r"""
import os
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk
GLib.set_prgname("osguard-focus-test")
window = Gtk.Window(title="osguard-focus-test")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
outside = Gtk.Entry()
box.pack_start(outside, False, False, 0)
bar = Gtk.Toolbar()
item = Gtk.ToolItem()
inside = Gtk.Entry()
item.add(inside)
bar.insert(item, 0)
bar.get_accessible().set_name("Find")
box.pack_start(bar, False, False, 0)
window.add(box)
window.connect("destroy", Gtk.main_quit)
window.show_all()
outside.grab_focus()
def poll():
    if os.path.exists(os.path.expanduser("~/move-focus")):
        inside.grab_focus()
        return False
    return True
GLib.timeout_add(100, poll)
Gtk.main()
"""


@pytest.fixture(scope="module")
def env(private_state_dir: Path, local_provider) -> Iterator[object]:
    environment = start_as_built(local_provider)
    yield environment
    environment.stop()


def _launch_gtk(env, name: str, script: str, title: str) -> None:
    """Start the GTK test application ``script`` in ``env`` and wait for its window ``title``
    (skipped where the environment has no display)."""
    if not env.capabilities.gui:
        pytest.skip("no GUI in this environment")
    run_steps(env, [
        {"write": {"path": f"~/{name}.py", "text": script}},
        {"launch": {"command": ["python3", f"/home/user/{name}.py"]}},
        {"wait_for": {"window": title, "strict": True, "timeout": 60}},
    ], None, phase="setup", ctx=StepContext(home="/home/user", tasks_dir=Path(".")))


def test_the_harness_waits_for_a_file_after_the_action(env):
    result = env.run_action(Action.parse({
        "shell": "(sleep 1; echo late > ~/late.txt) >/dev/null 2>&1 &",
        "wait_for": {"file": "~/late.txt", "timeout": 30},
    }))
    assert result.ok, result
    # the next action finds what the wait waited for
    assert env.run_bash("cat ~/late.txt").output == "late\n"


def test_the_harness_waits_for_as_many_files_as_a_pattern_asks(env):
    """Four pictures pasted one after another: a pattern with ``count`` waits for all of them,
    and a ``count`` that never comes says what it waited for."""
    result = env.run_action(Action.parse({
        "shell": "mkdir -p ~/pasted; (for i in 1 2 3 4; do sleep 0.3; touch ~/pasted/$i.jpg; done) >/dev/null 2>&1 &",
        "wait_for": {"file": "~/pasted/*.jpg", "count": 4, "timeout": 30},
    }))
    assert result.ok, result
    assert env.run_bash("ls ~/pasted | wc -l").output.strip() == "4"
    more = env.run_action(Action.parse({"shell": "true", "wait_for": {"file": "~/pasted/*.jpg", "count": 5, "timeout": 0.5}}))
    assert more.returncode == 1
    assert more.error == ("after the action the harness waited for 5 files '~/pasted/*.jpg': "
                          "still not there after 0.5 s")
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {"file": "~/pasted/[12].jpg", "count": 2,
                                                                      "timeout": 5}})).ok


def test_settle_waits_more_once_the_condition_holds(env):
    """The condition holds at once; a file written 0.2 s after the action is there when the
    action returns only because of the 3 s settle (the dialog that follows another)."""
    result = env.run_action(Action.parse({
        "shell": "touch ~/first; (sleep 0.2; touch ~/follows) >/dev/null 2>&1 &",
        "wait_for": {"file": "~/first", "timeout": 10, "settle": 3},
    }))
    assert result.ok, result
    assert env.run_bash("ls ~/follows").returncode == 0


def test_a_wait_that_never_comes_fails_the_action_and_says_what_it_waited_for(env):
    result = env.run_action(Action.parse({"shell": "echo ran", "wait_for": {"file": "~/never-written", "timeout": 0.5}}))
    assert (result.returncode, result.output) == (1, "ran\n")
    assert result.error == ("after the action the harness waited for file '~/never-written': "
                            "still not there after 0.5 s")


def test_a_failed_action_is_not_waited_for(env):
    result = env.run_action(Action.parse({"shell": "exit 3", "wait_for": {"file": "~/never-written", "timeout": 60}}))
    assert result.returncode == 3
    assert "harness waited" not in result.error


def test_the_harness_waits_for_the_focus_inside_a_named_tool_bar(env):
    _launch_gtk(env, "focus_app", FOCUS_APP, "osguard-focus-test")
    focus = {"focus_in": "Find", "role": "tool bar", "app": "osguard-focus-test", "strict": True}
    # The focus is in the entry outside the tool bar: the wait does not come.
    before = env.run_action(Action.parse({"shell": "true", "wait_for": {**focus, "timeout": 2}}))
    assert before.returncode == 1
    assert before.error == ("after the action the harness waited for the focus in tool bar 'Find' of "
                            "'osguard-focus-test': still not there after 2 s")
    # A tool bar of another name or role is not the one asked for.
    assert env.run_action(Action.parse({"shell": "touch ~/move-focus",
                                        "wait_for": {**focus, "role": "menu bar", "timeout": 2}})).returncode == 1
    # The action moves the focus into the tool bar (100 ms later at most): the wait sees it.
    after = env.run_action(Action.parse({"shell": "touch ~/move-focus", "wait_for": {**focus, "timeout": 30}}))
    assert after.ok, after
    wrong_app = env.run_action(Action.parse({"shell": "true", "wait_for": {**focus, "app": "soffice", "timeout": 1}}))
    assert wrong_app.returncode == 1


# A GTK window whose labels are the hits of a search: "alpha.jpg" at once, "beta.jpg" and the
# selection label once ~/show-more exists (as GNOME Files lists hits, then "2 items selected").
SHOWN_APP = r"""
import os
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk
GLib.set_prgname("osguard-shown-test")
window = Gtk.Window(title="osguard-shown-test")
box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
box.pack_start(Gtk.Label(label="alpha.jpg"), False, False, 0)
window.add(box)
window.connect("destroy", Gtk.main_quit)
window.show_all()
def poll():
    if os.path.exists(os.path.expanduser("~/show-more")):
        for text in ("beta.jpg", "2 items selected"):
            label = Gtk.Label(label=text)
            box.pack_start(label, False, False, 0)
            label.show()
        return False
    return True
GLib.timeout_add(100, poll)
Gtk.main()
"""


def test_the_harness_waits_for_names_shown_in_the_accessibility_tree(env):
    _launch_gtk(env, "shown_app", SHOWN_APP, "osguard-shown-test")
    hits = {"shown": ["alpha.jpg", "beta.jpg"], "app": "osguard-shown-test", "strict": True}
    # One of the two is shown: the wait does not come, and says which is missing.
    before = env.run_action(Action.parse({"shell": "true", "wait_for": {**hits, "timeout": 2}}))
    assert before.returncode == 1
    assert before.error == ("after the action the harness waited for shown 'alpha.jpg', 'beta.jpg' in "
                            "'osguard-shown-test': still not there after 2 s; not shown: 'beta.jpg'")
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {"shown": "alpha.jpg", "role": "label",
                                                                      "app": "osguard-shown-test"}})).ok
    # Another application's tree does not count; nor does another role.
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {**hits, "shown": "alpha.jpg", "app": "soffice",
                                                                      "timeout": 1}})).returncode == 1
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {**hits, "shown": "alpha.jpg",
                                                                      "role": "push button", "timeout": 1}})).returncode == 1
    # Strict is the whole name; without it a part of it, whatever the case.
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {**hits, "shown": "ALPHA", "timeout": 1}})).returncode == 1
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {"shown": "ALPHA", "app": "osguard-shown-test",
                                                                      "timeout": 5}})).ok
    # The action makes the rest appear (100 ms later at most): the wait sees all of them.
    after = env.run_action(Action.parse({"shell": "touch ~/show-more", "wait_for": {**hits, "timeout": 30}}))
    assert after.ok, after
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {"shown": "2 items selected",
                                                                      "app": "osguard-shown-test", "timeout": 5}})).ok
    gone = env.run_action(Action.parse({"shell": "true", "wait_for": {**hits, "gone": True, "timeout": 1}}))
    assert gone.returncode == 1 and gone.error.endswith("still there after 1 s")
    # The window closes (its application quits and leaves the registry): the names are gone.
    closed = env.run_action(Action.parse({"shell": "wmctrl -c osguard-shown-test",
                                          "wait_for": {**hits, "gone": True, "timeout": 30}}))
    assert closed.ok, closed
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {"window": "osguard-shown-test", "strict": True,
                                                                      "gone": True, "timeout": 5}})).ok


def test_the_harness_waits_for_what_a_file_contains(env):
    """A setting written a while after the action (Chromium writes its Preferences ~10 s
    after a change): ``contains`` waits for the text, ``gone`` for it to leave."""
    env.run_bash("""printf '{"cookies":1}' > ~/prefs.json""")
    result = env.run_action(Action.parse({
        "shell": """(sleep 1; printf '{"cookies":4}' > ~/prefs.json.new; mv ~/prefs.json.new ~/prefs.json) >/dev/null 2>&1 &""",
        "wait_for": {"file": "~/prefs.json", "contains": '"cookies":4', "timeout": 30},
    }))
    assert result.ok, result
    assert env.run_bash("cat ~/prefs.json").output == '{"cookies":4}'
    never = env.run_action(Action.parse({"shell": "true", "wait_for": {"file": "~/prefs.json", "contains": '"cookies":1',
                                                                       "timeout": 0.5}}))
    assert never.error == ("after the action the harness waited for file '~/prefs.json' containing "
                           "'\"cookies\":1': still not there after 0.5 s")
    missing = env.run_action(Action.parse({"shell": "true", "wait_for": {"file": "~/no-such.json", "contains": "x",
                                                                         "timeout": 0.5}}))
    assert missing.returncode == 1
    left = env.run_action(Action.parse({"shell": "printf '{}' > ~/prefs.json",
                                        "wait_for": {"file": "~/prefs.json", "contains": '"cookies"', "gone": True,
                                                     "timeout": 10}}))
    assert left.ok, left


def test_changed_waits_for_the_file_to_be_written_after_the_action_started(env):
    """A save lands a moment after Ctrl+S returned, over a file that was there already:
    ``changed`` waits until the file differs from what it was before the action (written in
    place, or replaced by a rename), and a write that came before the wait began counts."""
    env.run_bash("printf 'old' > ~/book.xlsx")
    later = env.run_action(Action.parse({
        "shell": "(sleep 1; printf 'new' > ~/book.xlsx.tmp; mv ~/book.xlsx.tmp ~/book.xlsx) >/dev/null 2>&1 &",
        "wait_for": {"file": "~/book.xlsx", "changed": True, "timeout": 30},
    }))
    assert later.ok, later
    assert env.run_bash("cat ~/book.xlsx").output == "new"
    # written during the action itself, in place, the same size: the fingerprint before the
    # action differs (a wait that only looked from its own start would time out here)
    at_once = env.run_action(Action.parse({"shell": "printf 'NEW' > ~/book.xlsx",
                                           "wait_for": {"file": "~/book.xlsx", "changed": True, "timeout": 3}}))
    assert at_once.ok, at_once
    untouched = env.run_action(Action.parse({"shell": "cat ~/book.xlsx >/dev/null",
                                             "wait_for": {"file": "~/book.xlsx", "changed": True, "timeout": 0.5}}))
    assert untouched.error == ("after the action the harness waited for file '~/book.xlsx' changed: "
                               "still not there after 0.5 s")
    # a new file counts as changed; with contains, both must hold
    env.run_bash("rm -f ~/fresh.txt")
    created = env.run_action(Action.parse({"shell": "printf 'saved' > ~/fresh.txt",
                                           "wait_for": {"file": "~/fresh.txt", "changed": True, "contains": "saved",
                                                        "timeout": 3}}))
    assert created.ok, created
    wrong_text = env.run_action(Action.parse({"shell": "printf 'other' > ~/fresh.txt",
                                              "wait_for": {"file": "~/fresh.txt", "changed": True, "contains": "saved",
                                                           "timeout": 0.5}}))
    assert wrong_text.returncode == 1


# An undecorated GTK window at the top left, painted #123456 until ~/repaint exists, then
# #ffffff (as a field's focus frame or a radio button changes colour on a page with no
# accessibility tree).
PIXEL_APP = r"""
import os
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, GLib, Gtk
window = Gtk.Window(title="osguard-pixel-test")
window.set_decorated(False)
window.move(0, 0)
window.set_default_size(200, 200)
css = Gtk.CssProvider()
css.load_from_data(b"window { background-color: #123456; } window.late { background-color: #ffffff; }")
Gtk.StyleContext.add_provider_for_screen(Gdk.Screen.get_default(), css, 800)
window.connect("destroy", Gtk.main_quit)
window.show_all()
def poll():
    if os.path.exists(os.path.expanduser("~/repaint")):
        window.get_style_context().add_class("late")
        return False
    return True
GLib.timeout_add(100, poll)
Gtk.main()
"""


def test_the_harness_waits_for_pixels_the_active_window_and_waits_in_order(env):
    _launch_gtk(env, "pixel_app", PIXEL_APP, "osguard-pixel-test")
    dark = {"pixel": [50, 50], "color": [0x12, 0x34, 0x56]}
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {**dark, "timeout": 30}})).ok
    white = {"pixel": [50, 50], "color": [255, 255, 255]}
    before = env.run_action(Action.parse({"shell": "true", "wait_for": {**white, "timeout": 1}}))
    assert before.error == ("after the action the harness waited for pixel [50, 50] of colour [255, 255, 255]: "
                            "still not there after 1 s; last seen [18, 52, 86]")
    # a list: every wait in order, each with its own timeout; the first that does not come fails
    both = env.run_action(Action.parse({"shell": "touch ~/repaint",
                                        "wait_for": [{**dark, "gone": True, "timeout": 30}, {**white, "timeout": 30},
                                                     {"window": "osguard-pixel-test", "strict": True}]}))
    assert both.ok, both
    second = env.run_action(Action.parse({"shell": "true", "wait_for": [{**white, "timeout": 5},
                                                                        {**dark, "timeout": 0.5}]}))
    assert second.error == ("after the action the harness waited for pixel [50, 50] of colour [18, 52, 86]: "
                            "still not there after 0.5 s; last seen [255, 255, 255]")
    # a box: some pixel of it has the colour (the window ends at x 199: a box across its edge
    # holds white, one beyond it does not)
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {"pixel": [190, 10, 260, 20],
                                                                      "color": [255, 255, 255], "timeout": 5}})).ok
    beyond = env.run_action(Action.parse({"shell": "true", "wait_for": {"pixel": [210, 10, 260, 20],
                                                                        "color": [255, 255, 255], "timeout": 0.5}}))
    assert beyond.error == ("after the action the harness waited for a pixel in box [210, 10, 260, 20] of colour "
                            "[255, 255, 255]: still not there after 0.5 s")
    # the active window: the one xdotool activates has the keyboard
    assert env.run_action(Action.parse({"shell": "xdotool search --name osguard-pixel-test windowactivate",
                                        "wait_for": {"active": "osguard-pixel-test", "strict": True, "timeout": 30}})).ok
    other = env.run_action(Action.parse({"shell": "true", "wait_for": {"active": "Options", "timeout": 0.5}}))
    assert other.error == ("after the action the harness waited for active window 'Options': still not there after "
                           "0.5 s; active: 'osguard-pixel-test'")
    assert env.run_action(Action.parse({"shell": "true", "wait_for": {"active": "PIXEL-TEST", "timeout": 5}})).ok
    closed = env.run_action(Action.parse({"shell": "wmctrl -c osguard-pixel-test",
                                          "wait_for": {"active": "osguard-pixel-test", "gone": True, "timeout": 30}}))
    assert closed.ok, closed


def test_the_wait_is_the_harness_s_not_part_of_the_action():
    """Pure: what an agent or a guardrail sees (render) carries no wait; an agent's recorded
    action equals the reference step it reproduces; the YAML and JSON forms keep the wait."""
    step = Action.parse({"pyautogui": "pyautogui.hotkey('ctrl', 'f')",
                         "wait_for": {"focus_in": "Find", "role": "tool bar", "timeout": 45}})
    recorded = Action("pyautogui", "pyautogui.hotkey('ctrl', 'f')")
    assert step.render() == recorded.render() == "[pyautogui] pyautogui.hotkey('ctrl', 'f')"
    assert step == recorded and hash(step) == hash(recorded)
    assert Action.parse(step.to_yaml()).wait_for == step.wait_for
    assert Action.from_json(step.to_json()).wait_for == {"focus_in": "Find", "role": "tool bar", "timeout": 45}
    with pytest.raises(ValueError, match="wait_for goes with a shell or pyautogui action"):
        Action.parse({"special": "DONE", "wait_for": {"file": "~/x"}})
    listed = Action.parse({"pyautogui": "pyautogui.hotkey('ctrl', 'l')",
                           "wait_for": [{"pixel": [1500, 62], "color": [255, 255, 255]}, {"window": "Settings"}]})
    assert listed == Action("pyautogui", "pyautogui.hotkey('ctrl', 'l')")
    assert Action.parse(listed.to_yaml()).wait_for == Action.from_json(listed.to_json()).wait_for == [
        {"pixel": [1500, 62], "color": [255, 255, 255]}, {"window": "Settings"}]
    with pytest.raises(ValueError, match=r"wait_for\[1\]: 'color' goes only with 'pixel'"):
        Action.parse({"shell": "true", "wait_for": [{"window": "x"}, {"file": "~/x", "color": [1, 2, 3]}]})
