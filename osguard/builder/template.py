"""Templates: a built variant's setup and hazards captured once, restored for every row.

``osguard check`` replays ~9 references per variant, each in its own fresh environment.
Building each from scratch re-runs the generators, uploads and file steps every time. A
``Template`` is what those steps left behind, captured once per variant: every file, folder
and symlink they created or changed under the home, /tmp and /var/tmp, with its content,
mode, owner and nanosecond times (and the times and modes of the folders on the way), as a
POSIX tar. A row's environment is still a fresh one (a new sandbox or container; nothing is
shared between rows), into which the provider restores the tar *before* its session starts;
the ``start:`` steps (the application opened on the document) and the baseline probe then
run in that environment exactly as in a fresh build.

Only variants whose setup (and hazards) consist of file steps alone are eligible
(``template_reason``): a step that runs a command or starts a program (``execute``,
``launch``, ``open``, ...) can have effects no file capture holds (a process, a file outside
the writable folders); such variants are built fresh for every row, as before. The effects
of file steps are exactly their operations' paths, which is what is captured: the session's
own files (X socket, window manager log) are not, so a row's session starts as a fresh
build's does.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osguard.errors import OsguardError

if TYPE_CHECKING:
    from osguard.providers.base import Environment, Provider
    from osguard.spec.model import Variant

# Where the steps of an eligible variant may write: the user's writable folders, the same
# on every provider (the home is /home/user everywhere).
ROOTS = ("/home/user", "/tmp", "/var/tmp")
# Operations whose whole effect is on the files at their path (see osguard.spec.render).
_FILE_OPS = {"write": "path", "mkdir": "path", "symlink": "path", "config_entry": "path", "chmod": "path",
             "contact": "file", "mail_filter": "file", "keybinding": "file"}
ARCHIVE = "/tmp/.osguard-template.tar"

# Run inside the environment: every entry under ROOTS, with what a change shows in.
_LIST = r"""
import json, os, sys
out = {}
for root in %s:
    for folder, dirs, files in os.walk(root):
        for name in [""] + dirs + files:
            path = os.path.join(folder, name) if name else folder
            try:
                st = os.lstat(path)
            except OSError:
                continue
            out[path] = [st.st_mode, st.st_size, st.st_mtime_ns, st.st_uid]
sys.stdout.write(json.dumps(out))
""" % (list(ROOTS),)


@dataclass
class Template:
    """A variant's built state, captured once (see the module docstring).

    Attributes:
        variant_id / spec_hash: the variant it was built from.
        hazards: whether the hazards are in it.
        provider: the provider's name (a template restores only there).
        image: the image it was built on (None: the provider's default).
        archive: the POSIX tar of the captured entries (paths relative to /).
        paths: the captured paths, for the record.
        timings: seconds to build and to capture it.
    """

    variant_id: str
    spec_hash: str
    hazards: bool
    provider: str
    image: str | None
    archive: bytes
    paths: tuple[str, ...]
    timings: dict[str, float] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """What a build record says about the template a row started from."""
        return {"variant_id": self.variant_id, "spec_hash": self.spec_hash, "hazards": self.hazards,
                "entries": len(self.paths), "bytes": len(self.archive), "timings": dict(self.timings)}

    def discard(self) -> None:
        """Forget the archive (templates hold nothing outside this process)."""
        self.archive = b""


def _steps(variant: "Variant", hazards: bool) -> list[Any]:
    return list(variant.setup) + (list(variant.hazards) if hazards else [])


def _expand(path: str) -> str:
    return "/home/user" + path[1:] if path == "~" or path.startswith("~/") else path


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def template_paths(variant: "Variant", hazards: bool = True) -> tuple[list[str], str | None]:
    """The paths the variant's setup (and hazards) operate on, or why it cannot be templated.

    Returns:
        ``(paths, None)`` when eligible, else ``([], reason)``.
    """
    from osguard.builder.steps import get_step, tasks_dir_for
    from osguard.spec.render import render

    paths: list[str] = []
    phases = [("setup", variant.setup)] + ([("hazards", variant.hazards)] if hazards else [])
    for phase, steps in phases:
        for index, step in enumerate(steps):
            handler = get_step(step.type, phase)
            if getattr(handler, "file_step", None) is None:
                return [], f"$.{phase}[{index}] ({step.type}) runs a command, not file operations"
            params = step.params
            if isinstance(params, dict):
                params = {k: v for k, v in params.items() if k != "note"}
            try:
                ops = render(step.type, params, tasks_dir=tasks_dir_for(variant)) or []
            except Exception as exc:  # the fresh build reports it, with file and line
                return [], f"$.{phase}[{index}] ({step.type}) does not render: {exc}"
            for op in ops:
                key = _FILE_OPS.get(op.get("op", ""))
                if key is None:
                    return [], f"$.{phase}[{index}] ({step.type}) has a {op.get('op')!r} operation"
                path = _expand(str(op[key])).rstrip("/") or "/"
                if not any(_under(path, root) for root in ROOTS):
                    return [], f"$.{phase}[{index}] ({step.type}) writes {path}, outside {', '.join(ROOTS)}"
                if path not in paths:
                    paths.append(path)
    return paths, None


def template_reason(variant: "Variant", hazards: bool = True) -> str | None:
    """None when the variant can be built from a template, else why not."""
    return template_paths(variant, hazards)[1]


def _listing(env: "Environment") -> dict[str, list[int]]:
    result = env.run_bash("/usr/bin/python3 -S -c " + _shell_quote(_LIST), timeout=120)
    if not result.ok:
        raise OsguardError(f"template: cannot list the environment's files: {(result.output or result.error)[-300:]}")
    return json.loads(result.output)


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def changed_entries(before: dict[str, list[int]], after: dict[str, list[int]], paths: list[str]) -> list[str]:
    """Entries new or changed between two listings that belong to the operations' ``paths``:
    the paths themselves, what lies under them, and the folders on the way to them (whose
    times the operations changed). Sorted, parents before children."""
    def related(entry: str) -> bool:
        return any(_under(entry, p) or _under(p, entry) for p in paths)

    return sorted(entry for entry, row in after.items() if before.get(entry) != row and related(entry))


def check_archive(archive: bytes) -> None:
    """Refuse an archive a provider must not extract on its host: a member outside the
    writable folders, with a ``..``, of a type other than file, folder or symlink, or below
    a symlink of the archive (extracting through it would write where it points).

    Raises:
        OsguardError: naming the first offending member.
    """
    import io
    import tarfile

    links: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        for member in tar:
            name = "/" + member.name.strip("/")
            bad = ""
            if ".." in name.split("/") or not any(_under(name, root) for root in ROOTS):
                bad = "outside " + ", ".join(ROOTS)
            elif not (member.isfile() or member.isdir() or member.issym()):
                bad = "not a file, folder or symlink"
            elif any(_under(name, link) for link in links):
                bad = "below a symlink of the archive"
            if bad:
                raise OsguardError(f"template: refusing archive member {member.name!r}: {bad}")
            if member.issym():
                links.add(name)


def make_template(variant: "Variant", provider: "str | Provider", *, image: str | None = None,
                  hazards: bool = True, start_timeout: float = 60) -> Template | None:
    """Build ``variant``'s setup (and hazards) once and capture what they made.

    Returns:
        The template, or None when the variant is not eligible (``template_reason``) or the
        provider cannot restore templates here (its ``template_support`` says why).

    Raises:
        RequirementsUnmet, BuildError, EnvironmentError_: as ``build_variant`` does.
    """
    from osguard.builder.archive import pack
    from osguard.builder.build import resolve_provider, start_environment
    from osguard.builder.steps import StepContext, run_steps, tasks_dir_for

    paths, reason = template_paths(variant, hazards)
    if reason is not None:
        return None
    provider_obj = resolve_provider(provider)
    support = getattr(provider_obj, "template_support", None)
    if support is None:
        return None
    started = time.perf_counter()
    env, _ = start_environment(provider_obj, variant, image=image, timeout=start_timeout)
    try:
        if support(env) is not None:
            return None
        mark = time.perf_counter()
        before = _listing(env)
        ctx = StepContext(home="/home/user", tasks_dir=tasks_dir_for(variant), variant=variant)
        run_steps(env, variant.setup, variant, phase="setup", ctx=ctx)
        if hazards:
            run_steps(env, variant.hazards, variant, phase="hazards", ctx=ctx)
        steps_s = time.perf_counter() - mark
        mark = time.perf_counter()
        captured = changed_entries(before, _listing(env), paths)
        archive = b""
        if captured:
            archive = pack(env, captured, label="template", recursive=False, archive=ARCHIVE)
            check_archive(archive)
        capture_s = time.perf_counter() - mark
    finally:
        env.stop()
    return Template(variant_id=variant.id, spec_hash=variant.spec_hash, hazards=hazards,
                    provider=provider_obj.name, image=image, archive=archive, paths=tuple(captured),
                    timings={"steps_s": round(steps_s, 4), "capture_s": round(capture_s, 4),
                             "total_s": round(time.perf_counter() - started, 4)})
