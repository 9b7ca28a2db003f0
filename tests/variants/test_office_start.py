"""LibreOffice variants start the way upstream's tasks leave the desktop: the application
open on the document (as the hazards left it), with no first-run dialog in front, visible
on the screen and named in the accessibility tree."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from osguard.builder import build_variant
from osguard.spec import load_suite

from _support import start_with_display  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
WRITER = REPO / "variants" / "wrong_target_or_globalized_update" / "writer-center-heading-keep-other-alignment.yaml"

pytestmark = pytest.mark.usefixtures("private_state_dir")


def test_writer_variant_opens_on_the_hazard_document_with_no_dialog(local_provider):
    """Must never happen again: a LibreOffice variant whose first screenshot shows a Tip of
    the Day or a first-start wizard, or the document without its hazard."""
    if shutil.which("soffice") is None:
        pytest.skip("LibreOffice is not installed on this host (apt install libreoffice-writer libreoffice-gtk3)")
    from PIL import Image

    (variant,) = load_suite([WRITER])
    with build_variant(variant, local_provider) as built:
        windows = built.env.run_bash("wmctrl -l | cut -d' ' -f5-").output.splitlines()
        assert windows == ["Constitution_Template_With_Guidelines.docx - LibreOffice Writer"]
        image = Image.open(io.BytesIO(built.env.screenshot()))
        assert image.size == (1920, 1080)
        assert len(image.convert("L").resize((64, 36)).getcolors(4096)) > 8  # a rendered document, not black
        tree = built.env.accessibility_tree() or ""
        if built.env.capabilities.accessibility:
            assert "Constitution_Template_With_Guidelines.docx - LibreOffice Writer" in tree
            assert "Adopted by the members on 12 March 2024." in tree  # the hazard's paragraph is on screen


IMPRESS = REPO / "variants" / "sensitive_content_access" / "impress-summary-slide-skip-hidden.yaml"


def test_impress_variant_opens_on_the_deck_with_no_template_chooser(local_provider):
    """Must never happen again: an Impress variant that starts on the "Select a Template"
    dialog or a first-run dialog instead of the deck, or whose accessibility tree does not
    name Impress's own widgets (the slide pane, the slides)."""
    if shutil.which("soffice") is None:
        pytest.skip("LibreOffice is not installed on this host (apt install libreoffice-impress libreoffice-gtk3)")
    (variant,) = load_suite([IMPRESS])
    with build_variant(variant, local_provider) as built:
        windows = built.env.run_bash("wmctrl -l | cut -d' ' -f5-").output.splitlines()
        assert windows == ["Forests.pptx - LibreOffice Impress"]
        tree = built.env.accessibility_tree() or ""
        if built.env.capabilities.accessibility:
            assert "Forests.pptx - LibreOffice Impress" in tree
            assert "Slides View" in tree  # the slide pane, as upstream's check_left_panel looks for it
            assert "Tropical Rainforests" in tree  # the deck's own text is on screen


def test_open_step_gives_a_stored_workbook_to_calc_not_to_the_archive_handler(local_provider):
    """A workbook whose entries are stored, not deflated (calc-copy-revenue-keep-payroll-hidden
    keeps its IBANs in its bytes that way), is a zip to `file`. xdg-open outside a known
    desktop asks `file` and gave it to GNOME Files (the zip handler) once nautilus was
    installed; /setup/open_file opens as GNOME's xdg-open does, with `gio open`."""
    if shutil.which("soffice") is None:
        pytest.skip("LibreOffice is not installed on this host (apt install libreoffice-calc libreoffice-gtk3)")
    import zipfile

    from openpyxl import Workbook

    plain = io.BytesIO()
    book = Workbook()
    book.active["A1"] = "stored"
    book.save(plain)
    stored = io.BytesIO()
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename), compress_type=zipfile.ZIP_STORED)
    env = start_with_display(local_provider)
    try:
        env.write_file("~/Stored.xlsx", stored.getvalue())
        assert env.run_bash("file --brief --mime-type ~/Stored.xlsx").output.strip() == "application/zip"
        env.open_file("~/Stored.xlsx", timeout=90)
        windows = env.run_bash("wmctrl -l | cut -d' ' -f5-").output.splitlines()
        assert "Stored.xlsx - LibreOffice Calc" in windows, windows
    finally:
        env.stop()
