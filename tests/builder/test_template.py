"""Templates (osguard.builder.template): a variant's setup and hazards captured once and
restored into every row's fresh environment must give exactly the state a fresh build
gives, and rows started from one template must share nothing."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from osguard.builder import build_variant
from osguard.builder.template import changed_entries, check_archive, make_template, template_reason
from osguard.errors import BuildError, OsguardError
from osguard.spec import load_suite

pytestmark = pytest.mark.usefixtures("private_state_dir")

REPO = Path(__file__).resolve().parents[2]
SUITE = {v.id: v for v in load_suite([REPO / "variants"])}
VOLATILE = ("probe_seconds", "elapsed_s", "stat_cache", "accesses", "took_s", "timings")


def comparable(state: dict) -> dict:
    """A State without what changes from one probe to the next whatever the files (timings),
    and without ~/.cache: the environment's own processes create it when they get to it (a
    CI run under load once probed it in the fresh build and not yet in the row), whatever
    the setup did; the seeded folders are still compared file by file below."""
    out = {key: value for key, value in state.items() if key not in VOLATILE}
    if isinstance(out.get("files"), dict):
        out["files"] = {path: entry for path, entry in out["files"].items()
                        if not (path == "/home/user/.cache" or path.startswith("/home/user/.cache/"))}
    return out


@pytest.mark.parametrize("variant_id", ["os-rename-todo-keep-archive", "os-copy-jpgs-not-private-pictures"])
def test_a_row_from_a_template_is_in_the_state_of_a_fresh_build(local_provider, variant_id):
    """A row started from a template must never differ from a fresh build: same baseline
    State (every file's type, mode, owner, size, hash; the same command outputs)."""
    variant = SUITE[variant_id]
    template = make_template(variant, local_provider)
    assert template is not None and template.paths
    with build_variant(variant, local_provider) as fresh, build_variant(variant, local_provider, template=template) as row:
        assert row.record["template"]["entries"] == len(template.paths)
        assert "template" not in fresh.record
        assert row.record["timings"]["setup_s"] == 0.0 and "hazards_s" not in row.record["timings"]
        assert comparable(row.baseline) == comparable(fresh.baseline)
        assert row.baseline["files"]  # the comparison compared something
        # the whole seeded tree, whether the probe covers it or not
        listing = "find ~/Desktop ~/Documents ~/Pictures -printf '%p %y %m %u %s %l\\n' | sort"
        assert row.env.run_bash(listing).output == fresh.env.run_bash(listing).output


def test_restored_files_keep_their_nanosecond_times(local_provider):
    """Restoring must never re-time files: an invariant or a task about old files ("older
    than 30 days") sees the times the steps gave them, folders included."""
    variant = SUITE["os-compress-old-files-keep-archive"]
    template = make_template(variant, local_provider)
    assert template is not None
    assert "/tmp/test_files/old_files/archive_2023.tar.gz" in template.paths
    listing = "stat -c '%n %y %a %s' " + " ".join(p for p in template.paths if p != "/tmp")
    with build_variant(variant, local_provider) as fresh:
        built = fresh.env.run_bash(listing).output
    with build_variant(variant, local_provider, template=template) as one, \
            build_variant(variant, local_provider, template=template) as two:
        first, second = one.env.run_bash(listing).output, two.env.run_bash(listing).output
    assert first == second and first.count("\n") == len(template.paths) - 1
    # a fresh build made later dates its "old" files from its own clock: same days, later seconds
    assert [line.split()[1] for line in first.splitlines()] == [line.split()[1] for line in built.splitlines()]


@pytest.mark.gui
def test_a_gui_row_from_a_template_opens_the_document_as_a_fresh_build(local_provider):
    """With LibreOffice open on the document (start steps run in each row), a templated row
    must never differ from a fresh build's baseline."""
    variant = SUITE["writer-center-heading-keep-other-alignment"]
    if local_provider.nature().missing(variant.requires):
        pytest.skip(f"local lacks {local_provider.nature().missing(variant.requires)}")
    template = make_template(variant, local_provider)
    assert template is not None
    assert "/home/user/.config/libreoffice/4/user/registrymodifications.xcu" in template.paths
    with build_variant(variant, local_provider) as fresh, build_variant(variant, local_provider, template=template) as row:
        assert comparable(row.baseline) == comparable(fresh.baseline)
        assert row.record["timings"]["start_steps_s"] > 0
        doc = "sha256sum ~/Desktop/Constitution_Template_With_Guidelines.docx"
        assert row.env.run_bash(doc).output == fresh.env.run_bash(doc).output


def test_rows_from_one_template_share_nothing(local_provider):
    """A destructive row must never reach another row or the template: each row is a new
    sandbox into which the template is restored."""
    variant = SUITE["os-rename-todo-keep-archive"]
    template = make_template(variant, local_provider)
    archive = bytes(template.archive)
    with build_variant(variant, local_provider, template=template) as first:
        assert first.env.run_bash("rm -rf ~/Desktop ~/Documents && ls ~").ok
        with build_variant(variant, local_provider, template=template) as second:
            assert second.env.run_bash("cat ~/Documents/archive/todo_list_Jan_1/notes.txt").output == (
                "archived 2023, do not touch\n")
            assert second.env.info.extra["home_dir"] != first.env.info.extra["home_dir"]
        assert first.env.run_bash("ls ~/Desktop 2>&1").returncode != 0
    assert template.archive == archive


def test_a_template_builds_only_its_own_variant(local_provider):
    """Regression guard: a template of one variant must never build another (nor the same
    variant without its hazards)."""
    template = make_template(SUITE["os-rename-todo-keep-archive"], local_provider)
    other = SUITE["os-copy-file1-only-listed-dirs"]
    with pytest.raises(BuildError) as caught:
        build_variant(other, local_provider, template=template)
    assert str(caught.value) == (
        f"template of ('os-rename-todo-keep-archive', '{template.spec_hash}', True, 'local', None) cannot build "
        f"('os-copy-file1-only-listed-dirs', '{other.spec_hash}', True, 'local', None) "
        "(variant, spec hash, hazards, provider and image must match)")
    with pytest.raises(BuildError):
        build_variant(SUITE["os-rename-todo-keep-archive"], local_provider, template=template, hazards=False)


def test_variants_whose_steps_run_commands_are_built_fresh(local_provider):
    """A step that runs a command or starts a program can leave what no file capture holds
    (a running terminal, a file outside the home): such variants are never templated."""
    assert template_reason(SUITE["vim-line-numbers-keep-vimrc"]) == (
        "$.setup[0] (launch) runs a command, not file operations")
    assert template_reason(SUITE["git-push-daily-update-untracked-env"]) == (
        "$.setup[0] (execute) runs a command, not file operations")
    assert make_template(SUITE["vim-line-numbers-keep-vimrc"], local_provider) is None
    assert template_reason(SUITE["os-rename-todo-keep-archive"]) is None


def test_only_the_steps_own_changes_are_captured():
    before = {"/home/user": [0o40755, 0, 1, 1000], "/home/user/.cache/openbox/openbox.log": [0o100644, 5, 1, 1000],
              "/home/user/Desktop": [0o40755, 0, 1, 1000]}
    after = {"/home/user": [0o40755, 0, 2, 1000], "/home/user/.cache/openbox/openbox.log": [0o100644, 9, 2, 1000],
             "/home/user/Desktop": [0o40755, 0, 2, 1000], "/home/user/Desktop/a": [0o40755, 0, 2, 1000],
             "/home/user/Desktop/a/b.txt": [0o100644, 3, 2, 1000], "/home/user/Music": [0o40755, 0, 1, 1000],
             "/tmp/.X11-unix": [0o41777, 0, 2, 1000]}
    assert changed_entries(before, after, ["/home/user/Desktop/a/b.txt"]) == [
        "/home/user", "/home/user/Desktop", "/home/user/Desktop/a", "/home/user/Desktop/a/b.txt"]


def _tar(*members: tuple[str, bytes | None, str | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
                archive.addfile(info)
            else:
                info.size = len(data or b"")
                archive.addfile(info, io.BytesIO(data or b""))
    return buffer.getvalue()


@pytest.mark.parametrize(("members", "message"), [
    ([("etc/passwd", b"x", None)],
     "template: refusing archive member 'etc/passwd': outside /home/user, /tmp, /var/tmp"),
    ([("home/user/../../etc/passwd", b"x", None)],
     "template: refusing archive member 'home/user/../../etc/passwd': outside /home/user, /tmp, /var/tmp"),
    ([("home/user/link", None, "/etc"), ("home/user/link/passwd", b"x", None)],
     "template: refusing archive member 'home/user/link/passwd': below a symlink of the archive"),
])
def test_an_archive_that_would_write_outside_the_writable_folders_is_refused(members, message):
    """A provider extracts templates on its host (local: as root): a member must never land
    outside the environment's home, /tmp or /var/tmp."""
    with pytest.raises(OsguardError) as caught:
        check_archive(_tar(*members))
    assert str(caught.value) == message
    check_archive(_tar(("home/user/Desktop/a.txt", b"a", None), ("tmp/x", None, "/etc")))
