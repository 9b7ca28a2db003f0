"""osguard's OSWorld getters against desktop-env's own, on the same REAL local environment.

desktop-env is installed without its heavy dependencies (``pip install desktop-env --no-deps``),
so its getter modules are loaded one by one from the wheel; the few third-party modules a
module imports at the top but the getters compared here never call (playwright, pydrive,
cssselect, pytz) are replaced by empty modules for the import only. Every upstream getter
runs unchanged through desktop-env's PythonController against osguard's server.
"""

from __future__ import annotations

import importlib
import json
import sqlite3
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from osguard.evaluators.getters import GETTER_PARAMS, GETTERS, LEFT_OUT, GetterContext, get_getter

from _support import start_as_built  # noqa: E402

pytestmark = pytest.mark.usefixtures("private_state_dir")

# pytz last: misc.py (imported last) needs it, pandas (imported before by file.py) must not see the stub
WHEEL_STUBS = ("playwright", "playwright.sync_api", "pydrive", "pydrive.auth", "pydrive.drive", "pytz")


@pytest.fixture(scope="module")
def upstream(request: pytest.FixtureRequest) -> dict[str, Any]:
    """desktop-env's getter modules, loaded from the wheel without its package __init__."""
    try:
        base = Path(importlib.util.find_spec("desktop_env").origin).parent  # type: ignore[union-attr,arg-type]
    except (AttributeError, TypeError, ValueError):
        pytest.skip("desktop-env is not installed (pip install desktop-env --no-deps)")
    saved = {name: sys.modules.get(name) for name in
             ("desktop_env.evaluators", "desktop_env.evaluators.getters", "lxml.cssselect", *WHEEL_STUBS)}

    before = set(sys.modules)

    def restore() -> None:
        # Modules this fixture imported for the first time go as a whole, submodules
        # included: a package popped while its submodules stay (playwright without
        # playwright._impl) breaks every later import of it.
        roots = tuple(name.split(".")[0] for name in WHEEL_STUBS)
        for name in [n for n in sys.modules if n not in before and n.split(".")[0] in roots]:
            del sys.modules[name]
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        for name in [n for n in sys.modules if n.startswith("desktop_env.evaluators.getters.")]:
            del sys.modules[name]

    request.addfinalizer(restore)
    for name, path in (("desktop_env.evaluators", base / "evaluators"),
                       ("desktop_env.evaluators.getters", base / "evaluators" / "getters")):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]  # type: ignore[attr-defined]
        sys.modules[name] = package
    try:
        import pandas  # noqa: F401  (before the pytz stub: pandas checks pytz's version)
    except ImportError:
        pass
    for name in WHEEL_STUBS:
        try:
            importlib.import_module(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.__path__ = []  # type: ignore[attr-defined]
            for attr in ("sync_playwright", "expect", "GoogleAuth", "GoogleDrive", "GoogleDriveFileList",
                         "GoogleDriveFile"):
                setattr(stub, attr, None)
            sys.modules[name] = stub
    try:
        import lxml.cssselect  # noqa: F401
    except ImportError:
        css = types.ModuleType("lxml.cssselect")
        css.CSSSelector = None  # type: ignore[attr-defined]
        sys.modules["lxml.cssselect"] = css
    modules = {}
    for name in ("general", "file", "info", "misc", "chrome", "gimp", "vlc"):
        try:
            modules[name] = importlib.import_module(f"desktop_env.evaluators.getters.{name}")
        except ImportError as exc:
            pytest.skip(f"desktop-env getter module {name} cannot be imported: {exc}")
    return modules


@pytest.fixture(scope="module")
def env(local_provider: Any) -> Any:
    environment = start_as_built(local_provider)
    yield environment
    environment.stop()


@pytest.fixture
def both(env: Any, upstream: dict[str, Any], tmp_path: Path):
    """call(name, config) -> (ours, theirs), each with its own cache folder."""
    from desktop_env.controllers.python import PythonController
    from urllib.parse import urlparse

    url = urlparse(env.info.endpoint)
    controller = PythonController(url.hostname, url.port)
    controller.retry_times, controller.retry_interval = 1, 0  # a missing file: one try, no 5 s sleep
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    theirs_env = SimpleNamespace(controller=controller, vm_ip=url.hostname, server_port=url.port,
                                 cache_dir=str(tmp_path / "theirs"), vm_platform="Linux")
    ctx = GetterContext(env=env, cache_dir=tmp_path / "ours")
    functions = {}
    for module in upstream.values():
        functions.update({n[4:]: getattr(module, n) for n in dir(module) if n.startswith("get_")})

    def call(name: str, config: dict[str, Any]) -> tuple[Any, Any]:
        config = {"type": name, **config}
        return get_getter(name)(ctx, dict(config)), functions[name](theirs_env, dict(config))

    return call


def _content(value: Any) -> Any:
    """A fetched path compares by the file's bytes (the cache folders differ)."""
    if isinstance(value, str) and Path(value).is_file():
        return Path(value).read_bytes()
    return value


def test_every_getter_declares_its_parameters_and_none_is_both_implemented_and_left_out() -> None:
    assert set(GETTER_PARAMS) == set(GETTERS)
    assert not set(LEFT_OUT) & set(GETTERS)


def test_terminal_output_matches_upstream(both: Any) -> None:
    """Regression: vm_terminal_output (OSWorld's /terminal) was not implemented."""
    ours, theirs = both("vm_terminal_output", {})
    assert ours == theirs


def test_commands_files_and_listings_match_upstream(env: Any, both: Any) -> None:
    env.run_bash("mkdir -p ~/g/sub && printf 'alpha\\n' > ~/g/a.txt && printf 'b' > ~/g/sub/b.bin")
    for name, config in [
        ("vm_command_line", {"command": "ls ~/g; echo out", "shell": True}),
        ("vm_command_error", {"command": "ls ~/g/missing", "shell": True}),
        ("vm_command_line", {"command": ["cat", "/home/user/g/a.txt"]}),
        ("list_directory", {"path": "/home/user/g"}),
        ("rule", {"rules": {"expected": "x"}}),
        ("time_diff_range", {"diff_range_in_minutes": 5}),
    ]:
        ours, theirs = both(name, config)
        assert ours == theirs, name
    ours, theirs = both("vm_file", {"path": "/home/user/g/a.txt", "dest": "a.txt"})
    assert _content(ours) == _content(theirs) == b"alpha\n"
    assert both("vm_file", {"path": "/home/user/g/none.txt", "dest": "none.txt"}) == (None, None)


def test_content_from_vm_file_matches_upstream(env: Any, both: Any) -> None:
    pytest.importorskip("pandas")
    import io

    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    for row in (["name", "count", "ratio", "maybe", "when"], ["a", 1, 0.5, 3, "x"], ["b", 2, 1.0, None, "y"],
                ["c", 3, 2.25, 7, "z"]):
        sheet.append(row)
    buffer = io.BytesIO()
    book.save(buffer)
    env.write_file("/home/user/t.xlsx", buffer.getvalue())
    config = {"path": "/home/user/t.xlsx", "file_type": "xlsx", "file_content": "last_row"}
    ours, theirs = both("content_from_vm_file", config)
    assert ours == theirs == ["c", "3", "2.25", "7.0", "z"]


PREFERENCES = {
    "default_search_provider_data": {"template_url_data": {"short_name": "Bing"}},
    "profile": {"name": "Work", "default_content_setting_values": {"cookies": 1}},
    "webkit": {"webprefs": {"default_font_size": 20}},
    "enable_do_not_track": True,
    "safebrowsing": {"enabled": True, "enhanced": False},
    "session": {"restore_on_startup": 5},
    "extensions": {"settings": {"abc": {"path": "/home/user/ext", "manifest": {"name": "Helper"}}}},
}
CHROME_GETTERS = ("default_search_engine", "profile_name", "chrome_language", "chrome_font_size",
                  "enabled_experiments", "enable_do_not_track", "enable_enhanced_safety_browsing",
                  "enable_safe_browsing", "new_startup_page", "data_delete_automacally",
                  "find_unpacked_extension_path", "find_installed_extension_name", "bookmarks")


def test_chrome_profile_getters_match_upstream(env: Any, both: Any, tmp_path: Path) -> None:
    profile = "/home/user/.config/google-chrome"
    env.run_bash(f"rm -rf {profile}")
    for name in CHROME_GETTERS:  # no profile: upstream's fallback values
        ours, theirs = both(name, {})
        assert ours == theirs, name
    env.write_file(f"{profile}/Default/Preferences", json.dumps(PREFERENCES).encode())
    env.write_file(f"{profile}/Local State", json.dumps(
        {"intl": {"app_locale": "de"}, "browser": {"enabled_labs_experiments": ["smooth-scrolling@1"]}}).encode())
    env.write_file(f"{profile}/Default/Bookmarks", json.dumps(
        {"roots": {"bookmark_bar": {"children": [{"name": "Docs", "url": "https://example.org/"}]}}}).encode())
    history = tmp_path / "History"
    with sqlite3.connect(history) as db:
        db.execute("CREATE TABLE urls (id INTEGER PRIMARY KEY, url TEXT, title TEXT, last_visit_time INTEGER)")
        db.execute("INSERT INTO urls (url, title, last_visit_time) VALUES ('https://example.org/', 'Example', 42)")
    db.close()
    env.write_file(f"{profile}/Default/History", history.read_bytes())
    for name in CHROME_GETTERS:
        ours, theirs = both(name, {})
        assert ours == theirs, name
    assert both("profile_name", {})[0] == "Work"
    ours, theirs = both("history", {"dest": "History"})
    assert ours == theirs == [("https://example.org/", "Example", 42)]


def test_app_config_getters_match_upstream(env: Any, both: Any) -> None:
    env.write_file("/home/user/.config/vlc/vlcrc", b"[qt]\nqt-privacy-ask=0\n")
    env.write_file("/home/user/.config/GIMP/2.10/gimprc", b"(default-view (show-menubar yes))\n")
    env.write_file("/home/user/Desktop/web.desktop", b"[Desktop Entry]\nName=Web\n")
    ours, theirs = both("vlc_config", {"dest": "vlcrc"})
    assert _content(ours) == _content(theirs) == b"[qt]\nqt-privacy-ask=0\n"
    ours, theirs = both("gimp_config_file", {"file_name": "gimprc", "dest": "gimprc"})
    assert _content(ours) == _content(theirs)
    assert both("gimp_config_file", {"file_name": "sessionrc", "dest": "sessionrc"}) == (None, None)
    ours, theirs = both("shortcuts_on_desktop", {})
    assert ours == theirs == {"web.desktop": "[Desktop Entry]\nName=Web\n"}


def test_screen_size_matches_upstream(env: Any, both: Any) -> None:
    if not env.capabilities.gui:
        pytest.skip("this environment has no display")
    ours, theirs = both("vm_screen_size", {})
    assert ours == theirs and set(ours) == {"width", "height"}
