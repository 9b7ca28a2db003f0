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
