"""OSWorld's state getters (``result``/``expected`` of an evaluator), under their names.

A getter is ``(ctx, config) -> value``: ``config`` is the ``{type: NAME, ...}`` mapping of the
task JSON, ``ctx`` carries the environment and a cache directory where fetched files land
(OSWorld's metrics take local file paths). Like upstream, a file that does not exist gives
``None`` (the metric then scores 0); a dead environment raises and becomes ``env_error``.

Every getter's parameters are declared in :data:`GETTER_PARAMS` (``osguard validate``
checks a spec against it); OSWorld getters osguard deliberately does not implement are
listed with the reason in :data:`LEFT_OUT`. Every file a getter reads goes through
:func:`read_env_file`, the one place that decides where final-state files are read from.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from osguard._registry import did_you_mean
from osguard.errors import OsguardError, UnknownNameError

if TYPE_CHECKING:
    from osguard.providers.base import Environment


@dataclass(frozen=True)
class GetterContext:
    """What getters may use.

    Attributes:
        env: the environment after the episode.
        cache_dir: a host directory for fetched files (OSWorld's ``env.cache_dir``).
        gold_dirs: host directories holding offline copies of ``cloud_file`` gold files,
            searched in order for ``<dest>`` (osguard never downloads).
    """

    env: "Environment"
    cache_dir: Path
    gold_dirs: tuple[Path, ...] = ()


class GoldFileMissing(OsguardError):
    """Raised when a ``cloud_file`` getter names a gold file with no offline copy."""


Getter = Callable[[GetterContext, dict[str, Any]], Any]

HOME = "/home/user"  # OSWorld's (and osguard's) environment user


# ----------------------------------------------------------------------------- file reads


def read_env_file(ctx: GetterContext, path: str) -> bytes | None:
    """The bytes of ``path`` in the environment after the episode, None when it is not a file.

    The only place getters (and the ``config_value`` success check) read final-state files:
    when the provider offers a trusted view of the final state (``env.trusted_view()``, read
    from outside the environment), this is the one line to point at it.
    """
    try:
        return ctx.env.read_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _cache_path(ctx: GetterContext, dest: str) -> Path:
    # ``dest`` comes from the spec; keep it inside the cache dir whatever it says.
    name = Path(str(dest)).name or "file"
    return ctx.cache_dir / name


def _fetch(ctx: GetterContext, path: str, dest: str) -> str | None:
    data = read_env_file(ctx, path)
    if data is None:
        return None
    local = _cache_path(ctx, dest)
    local.write_bytes(data)
    return str(local)


# ----------------------------------------------------------------------------- file getters


def get_vm_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: vm_file, path, dest, multi?, gives?}``: fetch file(s) into the cache.

    Returns the local path (None when the file does not exist); with ``multi`` the paths at
    the ``gives`` indices (a single path when ``gives`` has one index), as upstream.
    """
    if not config.get("multi"):
        return _fetch(ctx, config["path"], config.get("dest") or os.path.basename(config["path"]))
    paths = list(config["path"])
    dests = list(config.get("dest") or [os.path.basename(p) for p in paths])
    fetched = [_fetch(ctx, p, d) for p, d in zip(paths, dests)]
    gives = config.get("gives", [0])
    chosen = [fetched[i] for i in gives]
    return chosen[0] if len(chosen) == 1 else chosen


def get_cloud_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: cloud_file, path: URL, dest, multi?, gives?}``: a gold file, offline.

    Upstream downloads ``path`` into ``cache_dir/dest`` unless that file exists; osguard
    has no network, so ``dest`` must already be in the cache or in a gold directory
    (``tasks/gold/<osworld_id>/<dest>`` of the variant's suite).

    Raises:
        GoldFileMissing: when no offline copy exists.
    """
    paths = list(config["path"]) if config.get("multi") else [config["path"]]
    dests = list(config["dest"]) if config.get("multi") else [config["dest"]]
    gives = config.get("gives", [0])
    found: list[str] = []
    for index, (url, dest) in enumerate(zip(paths, dests)):
        if index not in gives:
            continue
        candidates = [ctx.cache_dir / str(dest)] + [folder / str(dest) for folder in ctx.gold_dirs]
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            where = ", ".join(str(c) for c in candidates[1:]) or "no gold directory"
            raise GoldFileMissing(f"cloud_file: no offline copy of {url} (looked for {dest!r} in: {where}); "
                                  "osguard never downloads: put the file there")
        found.append(str(hit))
    return found[0] if len(found) == 1 else found


def get_cache_file(ctx: GetterContext, config: dict[str, Any]) -> str:
    """``{type: cache_file, path}``: a file in the evaluation's cache directory."""
    return str(ctx.cache_dir / config["path"])


def get_content_from_vm_file(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: content_from_vm_file, path, file_type: xlsx, file_content: last_row}``: the
    last row of the first sheet as strings (upstream reads it with pandas: the first row is
    the header; numbers print as pandas prints them). None when the file does not exist.

    Raises:
        NotImplementedError: for another file type or content, as upstream.
    """
    if config.get("file_type") != "xlsx" or config.get("file_content") != "last_row":
        raise NotImplementedError(f"content_from_vm_file: file type {config.get('file_type')!r} with content "
                                  f"{config.get('file_content')!r} is not supported (only xlsx, last_row)")
    data = read_env_file(ctx, config["path"])
    if data is None:
        return None
    import io

    import openpyxl

    sheet = openpyxl.load_workbook(io.BytesIO(data), data_only=True, read_only=True).worksheets[0]
    rows = [list(row) for row in sheet.iter_rows(values_only=True)]
    while rows and all(v is None for v in rows[-1]):
        rows.pop()
    if len(rows) < 2:
        raise IndexError("content_from_vm_file: the sheet has no data row below its header")
    columns = list(zip(*[r + [None] * (len(rows[0]) - len(r)) for r in rows[1:]]))
    return [_pandas_text(column[-1], column) for column in columns]


def _pandas_text(value: Any, column: tuple[Any, ...]) -> str:
    # pandas gives a column of numbers with a blank the float dtype, an all-int column int64
    if value is None:
        return "nan"
    if isinstance(value, bool):
        return str(value)
    numbers = [v for v in column if v is not None]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers)
    if isinstance(value, (int, float)) and numeric:
        if all(isinstance(v, int) for v in numbers) and len(numbers) == len(column):
            return str(int(value))
        return repr(float(value))
    return str(value)


# ----------------------------------------------------------------------------- commands


def get_vm_command_line(ctx: GetterContext, config: dict[str, Any]) -> str:
    """``{type: vm_command_line, command, shell?}``: the command's stdout."""
    return ctx.env.execute(config["command"], shell=bool(config.get("shell", False))).output


def get_vm_command_error(ctx: GetterContext, config: dict[str, Any]) -> str:
    """``{type: vm_command_error, command, shell?}``: the command's stderr."""
    return ctx.env.execute(config["command"], shell=bool(config.get("shell", False))).error


def get_vm_terminal_output(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """``{type: vm_terminal_output}``: the text of the focused terminal (OSWorld's
    ``/terminal``), None when no terminal has the focus."""
    terminal = getattr(ctx.env, "terminal_output", None)
    if terminal is None:
        raise OsguardError(f"environment {type(ctx.env).__name__} cannot read terminal output")
    return terminal()


# ----------------------------------------------------------------------------- environment info


def get_rule(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: rule, rules}``: the rules, unchanged."""
    return config["rules"]


def get_time_diff_range(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: time_diff_range, diff_range_in_minutes}``: the value, unchanged."""
    return config.get("diff_range_in_minutes")


def get_list_directory(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: list_directory, path}``: the ``/list_directory`` tree (None if not a directory)."""
    try:
        tree = ctx.env.list_directory(config["path"])
    except (FileNotFoundError, NotADirectoryError):
        return None
    if isinstance(tree, dict) and "directory_tree" in tree:
        return tree["directory_tree"]
    return tree


def get_accessibility_tree(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """``{type: accessibility_tree}``: the ``/accessibility`` XML (None without one)."""
    return ctx.env.accessibility_tree()


def get_vm_screen_size(ctx: GetterContext, config: dict[str, Any]) -> dict[str, int]:
    """``{type: vm_screen_size}``: ``{width, height}`` of the display."""
    width, height = ctx.env.screen_size()  # type: ignore[attr-defined]
    return {"width": width, "height": height}


def get_vm_window_size(ctx: GetterContext, config: dict[str, Any]) -> dict[str, int] | None:
    """``{type: vm_window_size, app_class_name}``: ``{width, height}`` of that window, None if none."""
    return ctx.env.window_size(config["app_class_name"])  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- applications


def get_default_video_player(ctx: GetterContext, config: dict[str, Any]) -> str:
    """``{type: default_video_player}``: the application ``xdg-mime`` names most often as
    the default for upstream's list of ``video/*`` types; ``unknown`` when none."""
    apps = []
    for ext in _VIDEO_TYPES:
        app = ctx.env.execute(["xdg-mime", "query", "default", f"video/{ext}"]).output
        if app:
            apps.append(app)
    return Counter(apps).most_common(1)[0][0] if apps else "unknown"


# upstream's list, duplicates included (they weigh the vote the same way)
_VIDEO_TYPES = tuple(
    x for ext in ("3gp", "3gpp", "3gpp2", "avi", "divx", "dv", "fli", "flv", "mp2t", "mp4", "mp4v-es", "mpeg",
                  "mpeg-system", "msvideo", "ogg", "quicktime", "vnd.divx", "vnd.mpegurl", "vnd.rn-realvideo",
                  "webm", "x-anim", "x-avi", "x-flc", "x-fli", "x-flv", "x-m4v", "x-matroska", "x-mpeg",
                  "x-mpeg-system", "x-mpeg2", "x-ms-asf", "x-ms-asf-plugin", "x-ms-asx", "x-ms-wm", "x-ms-wmv",
                  "x-ms-wmx", "x-ms-wvx", "x-msvideo", "x-nsv", "x-ogm") for x in (ext, ext)
) + ("x-ogm+ogg", "x-theora", "x-theora", "x-theora+ogg", "x-theora+ogg")


def get_vlc_config(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """``{type: vlc_config, dest}``: ``~/.config/vlc/vlcrc`` fetched into the cache (None if missing)."""
    return _fetch(ctx, f"{HOME}/.config/vlc/vlcrc", config["dest"])


def get_gimp_config_file(ctx: GetterContext, config: dict[str, Any]) -> str | None:
    """``{type: gimp_config_file, file_name, dest}``: ``~/.config/GIMP/2.10/<file_name>``
    fetched into the cache (None if missing)."""
    return _fetch(ctx, f"{HOME}/.config/GIMP/2.10/{config['file_name']}", config["dest"])


# -- Chrome: the getters that only read the profile's files (no browser, no network) ----

# Upstream reads google-chrome's profile on x86 Linux; osguard images may ship chromium.
_CHROME_DIRS = (f"{HOME}/.config/google-chrome", f"{HOME}/.config/chromium")


def _chrome_file(ctx: GetterContext, relative: str) -> bytes | None:
    for folder in _CHROME_DIRS:
        data = read_env_file(ctx, f"{folder}/{relative}")
        if data is not None:
            return data
    return None


def _chrome_json(ctx: GetterContext, relative: str) -> Any:
    data = _chrome_file(ctx, relative)
    if data is None:
        raise FileNotFoundError(relative)
    return json.loads(data)


def _from_preferences(relative: str, pick: Callable[[Any], Any], fallback: Any, doc: str) -> Getter:
    """A Chrome getter reading one JSON file of the profile, with upstream's value on any error
    (missing file, bad JSON, missing key): upstream catches everything and returns ``fallback``."""

    def getter(ctx: GetterContext, config: dict[str, Any]) -> Any:
        try:
            return pick(_chrome_json(ctx, relative))
        except Exception:  # upstream: any failure gives the fallback value
            return fallback

    getter.__doc__ = doc
    return getter


def _flag(value: Any) -> str:
    return "true" if value else "false"


def _startup_page(data: dict[str, Any]) -> str:
    if "session" not in data:
        return "true"
    return _flag(data.get("session", {}).get("restore_on_startup", {}) == 5)


def _sqlite_rows(ctx: GetterContext, config: dict[str, Any], relative: str, query: str) -> list[Any] | None:
    data = _chrome_file(ctx, relative)
    if data is None:
        return None
    local = _cache_path(ctx, config["dest"])
    local.write_bytes(data)
    try:
        connection = sqlite3.connect(f"file:{local}?mode=ro", uri=True)
        try:
            return connection.execute(query).fetchall()
        finally:
            connection.close()
    except sqlite3.Error:
        return None


def get_history(ctx: GetterContext, config: dict[str, Any]) -> list[Any] | None:
    """``{type: history, dest}``: ``(url, title, last_visit_time)`` rows of Chrome's History."""
    return _sqlite_rows(ctx, config, "Default/History", "SELECT url, title, last_visit_time FROM urls")


def get_cookie_data(ctx: GetterContext, config: dict[str, Any]) -> list[Any] | None:
    """``{type: cookie_data, dest}``: every row of Chrome's cookies table."""
    return _sqlite_rows(ctx, config, "Default/Cookies", "SELECT * FROM cookies")


def get_bookmarks(ctx: GetterContext, config: dict[str, Any]) -> Any:
    """``{type: bookmarks}``: the ``roots`` of Chrome's Bookmarks file (``[]`` without the file)."""
    data = _chrome_file(ctx, "Default/Bookmarks")
    if not data:
        return []
    return json.loads(data).get("roots", {})


def get_shortcuts_on_desktop(ctx: GetterContext, config: dict[str, Any]) -> dict[str, str]:
    """``{type: shortcuts_on_desktop}``: ``{name: text}`` of every ``*.desktop`` file on ~/Desktop."""
    tree = get_list_directory(ctx, {"path": f"{HOME}/Desktop"}) or {}
    out: dict[str, str] = {}
    for entry in tree.get("children", []):
        name = entry.get("name", "")
        if name.endswith(".desktop"):
            data = read_env_file(ctx, f"{HOME}/Desktop/{name}")
            out[name] = (data or b"").decode("utf-8")
    return out


_PREFS = "Default/Preferences"
_CHROME_GETTERS: dict[str, Getter] = {
    "default_search_engine": _from_preferences(
        _PREFS,
        lambda d: d.get("default_search_provider_data", {}).get("template_url_data", {}).get("short_name", "Google"),
        "Google", "``{type: default_search_engine}``: the default search engine's short name."),
    "profile_name": _from_preferences(
        _PREFS, lambda d: d.get("profile", {}).get("name", None), None,
        "``{type: profile_name}``: the profile's name."),
    "chrome_language": _from_preferences(
        "Local State", lambda d: d.get("intl", {}).get("app_locale", "en-US"), "en-US",
        "``{type: chrome_language}``: the UI locale (Local State ``intl.app_locale``)."),
    "chrome_font_size": _from_preferences(
        _PREFS, lambda d: d.get("webkit", {}).get("webprefs", {"default_fixed_font_size": 13, "default_font_size": 16,
                                                              "minimum_font_size": 13}),
        {"default_fixed_font_size": 13, "default_font_size": 16},
        "``{type: chrome_font_size}``: ``webkit.webprefs`` (font sizes)."),
    "enabled_experiments": _from_preferences(
        "Local State", lambda d: d.get("browser", {}).get("enabled_labs_experiments", []), [],
        "``{type: enabled_experiments}``: the enabled chrome://flags entries."),
    "enable_do_not_track": _from_preferences(
        _PREFS, lambda d: _flag(d.get("enable_do_not_track", {})), "false",
        "``{type: enable_do_not_track}``: ``\"true\"``/``\"false\"``."),
    "enable_enhanced_safety_browsing": _from_preferences(
        _PREFS, lambda d: _flag(d.get("safebrowsing", {}).get("enhanced", {})), "Google",
        "``{type: enable_enhanced_safety_browsing}``: ``\"true\"``/``\"false\"`` "
        "(upstream's ``\"Google\"`` on error)."),
    "enable_safe_browsing": _from_preferences(
        _PREFS, lambda d: _flag(bool(d.get("safebrowsing", {}).get("enhanced", False))
                                or bool(d.get("safebrowsing", {}).get("enabled", False))), "false",
        "``{type: enable_safe_browsing}``: ``\"true\"``/``\"false\"``."),
    "new_startup_page": _from_preferences(
        _PREFS, _startup_page, "Google",
        "``{type: new_startup_page}``: ``\"true\"`` when Chrome opens the New Tab page at startup."),
    "data_delete_automacally": _from_preferences(
        _PREFS, lambda d: _flag(d["profile"].get("default_content_setting_values", None) is not None), "Google",
        "``{type: data_delete_automacally}`` (upstream's spelling): site data settings present."),
    "find_unpacked_extension_path": _from_preferences(
        _PREFS, lambda d: [v["path"] for v in d.get("extensions", {}).get("settings", {}).values()], "Google",
        "``{type: find_unpacked_extension_path}``: the paths of the installed extensions."),
    "find_installed_extension_name": _from_preferences(
        _PREFS,
        lambda d: [v["manifest"]["name"] for v in d.get("extensions", {}).get("settings", {}).values()], "Google",
        "``{type: find_installed_extension_name}``: the names of the installed extensions."),
}


# ----------------------------------------------------------------------------- registry

GETTERS: dict[str, Getter] = {
    "accessibility_tree": get_accessibility_tree,
    "vm_file": get_vm_file,
    "cache_file": get_cache_file,
    "cloud_file": get_cloud_file,
    "content_from_vm_file": get_content_from_vm_file,
    "vm_command_line": get_vm_command_line,
    "vm_command_error": get_vm_command_error,
    "vm_terminal_output": get_vm_terminal_output,
    "rule": get_rule,
    "time_diff_range": get_time_diff_range,
    "list_directory": get_list_directory,
    "vm_screen_size": get_vm_screen_size,
    "vm_window_size": get_vm_window_size,
    "default_video_player": get_default_video_player,
    "vlc_config": get_vlc_config,
    "gimp_config_file": get_gimp_config_file,
    "history": get_history,
    "cookie_data": get_cookie_data,
    "bookmarks": get_bookmarks,
    "shortcuts_on_desktop": get_shortcuts_on_desktop,
    **_CHROME_GETTERS,
}

# Each getter's parameters besides ``type``: (required, optional). Upstream ignores unknown
# keys; osguard refuses them (``osguard validate``), so a typo cannot silently change a check.
GETTER_PARAMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "accessibility_tree": ((), ()),
    "vm_file": (("path",), ("dest", "multi", "gives")),
    "cache_file": (("path",), ()),
    "cloud_file": (("path", "dest"), ("multi", "gives")),
    "content_from_vm_file": (("path", "file_type", "file_content"), ()),
    "vm_command_line": (("command",), ("shell",)),
    "vm_command_error": (("command",), ("shell",)),
    "vm_terminal_output": ((), ()),
    "rule": (("rules",), ()),
    "time_diff_range": (("diff_range_in_minutes",), ()),
    "list_directory": (("path",), ()),
    "vm_screen_size": ((), ()),
    "vm_window_size": (("app_class_name",), ()),
    "default_video_player": ((), ()),
    "vlc_config": (("dest",), ()),
    "gimp_config_file": (("file_name", "dest"), ()),
    "history": (("dest",), ()),
    "cookie_data": (("dest",), ()),
    "bookmarks": ((), ()),
    "shortcuts_on_desktop": ((), ()),
    **{name: ((), ()) for name in _CHROME_GETTERS},
}

# OSWorld getters osguard does not implement, and why (``osguard validate`` says so).
LEFT_OUT: dict[str, str] = {
    "vscode_config": "it replays keystrokes through VS Code's command palette; read the settings file with vm_file",
    "vm_wallpaper": "osguard's environments have no desktop wallpaper",
    "rule_relativeTime": "it depends on the wall clock and looks the time zone up on the network",
    "replay": "it replays GUI actions; put them in the references instead",
    "vlc_playing_info": "it needs VLC's HTTP interface running during the evaluation",
    "audio_in_slide": "no variant needs Impress media yet",
    "background_image_in_slide": "no variant needs Impress media yet",
    "conference_city_in_order": "it is task-specific spreadsheet parsing; use vm_file and a metric",
    "googledrive_file": "it needs Google Drive credentials and the network",
    "info_from_website": "it needs the network",
    "page_info": "it needs a live browser (CDP/playwright) and the network",
    "open_tabs_info": "it needs a live browser (CDP/playwright)",
    "active_tab_info": "it needs a live browser (CDP/playwright) and the network",
    "active_tab_html_parse": "it needs a live browser (CDP/playwright)",
    "active_tab_url_parse": "it needs a live browser (CDP/playwright)",
    "active_url_from_accessTree": "it needs a live browser",
    "pdf_from_url": "it needs a live browser and the network",
    "number_of_search_results": "it needs the network",
    "gotoRecreationPage_and_get_html_content": "it needs the network",
    "url_dashPart": "it needs a live browser",
    "url_path_parse": "it needs a live browser",
    "macys_product_url_parse": "it needs a live browser and the network",
    "chrome_saved_address": "it drives Chrome's settings page through the GUI",
    "extensions_installed_from_shop": "it lists the Web Store extension folder through Python inside the environment",
}


def get_getter(name: str) -> Getter:
    """The getter registered under ``name``.

    Raises:
        UnknownNameError: with the closest known name when there is one.
    """
    try:
        return GETTERS[name]
    except (KeyError, TypeError):
        raise UnknownNameError(unknown_getter_message(name)) from None


def unknown_getter_message(name: Any) -> str:
    """What ``validate`` and the evaluator say about a getter type osguard does not have."""
    if isinstance(name, str) and name in LEFT_OUT:
        return f"OSWorld getter {name!r} is not implemented by osguard: {LEFT_OUT[name]}"
    hint = did_you_mean(str(name), GETTERS) or f" (supported: {', '.join(sorted(GETTERS))})"
    return f"unknown OSWorld getter type {name!r}{hint}"
