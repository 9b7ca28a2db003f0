"""osguard's Impress metrics against desktop-env's own (1.0.2 ``slides.py``), same inputs.

``slides.py`` imports only the standard library and python-pptx, so it is loaded straight
from the wheel. The inputs are decks that differ from one another in one thing each (a
background, a note, a word, a run's size, colour, bold or strike, an alignment, a shape's
position, a table cell, a slide more, a transition), plus the LibreOffice-saved gold of the
Impress variant: every pair is scored by both implementations under several option sets.
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import logging
import sys
import zipfile
from pathlib import Path
from typing import Any, Callable

import pytest

from osguard.evaluators import metrics as ours

pptx = pytest.importorskip("pptx")
REPO = Path(__file__).resolve().parents[2]
GOLD = REPO / "tasks" / "gold" / "9cf05d24-6bd9-4dae-8967-f67d88f5d38a" / "214_9_Gold.pptx"


@pytest.fixture(scope="module")
def theirs() -> dict[str, Callable[..., Any]]:
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or spec.origin is None:
        pytest.skip("desktop-env is not installed (pip install desktop-env --no-deps)")
    path = Path(spec.origin).parent / "evaluators" / "metrics" / "slides.py"
    module_spec = importlib.util.spec_from_file_location("_upstream_slides", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)  # type: ignore[union-attr]
    # Upstream logs every comparison at DEBUG on a handler of its own; keep the test output quiet.
    logging.getLogger("desktopenv.metric.slides.debug").disabled = True
    return {"compare_pptx_files": module.compare_pptx_files, "check_transition": module.check_transition,
            "check_auto_saving_time": module.check_auto_saving_time}


def _deck(change: str = "") -> bytes:
    from pptx import Presentation
    from pptx.dml.color import RGBColor
    from pptx.enum.text import PP_ALIGN
    from pptx.util import Emu, Pt

    prs = Presentation()
    first = prs.slides.add_slide(prs.slide_layouts[1])
    first.shapes.title.text = "Quarterly Review"
    first.placeholders[1].text = "North\nSouth"
    first.notes_slide.notes_text_frame.text = "Speak slowly."
    second = prs.slides.add_slide(prs.slide_layouts[5])
    second.shapes.title.text = "Figures"
    table = second.shapes.add_table(2, 2, Emu(914400), Emu(2000000), Emu(4000000), Emu(1000000)).table
    for (r, c), text in zip(itertools.product(range(2), range(2)), ("A", "B", "1", "2")):
        table.cell(r, c).text = text
    run = first.placeholders[1].text_frame.paragraphs[0].runs[0]
    if change == "background":
        first.background.fill.solid()
        first.background.fill.fore_color.rgb = RGBColor(0x00, 0xA9, 0x33)
    elif change == "note":
        first.notes_slide.notes_text_frame.text = "Speak slowly.\nQuarterly Review"
    elif change == "word":
        run.text = "Norths"
    elif change == "size":
        run.font.size = Pt(28)
    elif change == "colour":
        run.font.color.rgb = RGBColor(0xFF, 0x00, 0x00)
    elif change == "bold":
        run.font.bold = True
    elif change == "not-bold":
        run.font.bold = False
    elif change == "underline":
        run.font.underline = True
    elif change == "strike":
        run.font._element.set("strike", "sngStrike")
    elif change == "align":
        first.shapes.title.text_frame.paragraphs[0].alignment = PP_ALIGN.RIGHT
    elif change == "moved":
        first.shapes.title.top = first.shapes.title.top + 400000
    elif change == "nudged":
        first.shapes.title.top = first.shapes.title.top + 2000
    elif change == "cell":
        table.cell(1, 1).text_frame.paragraphs[0].runs[0].font.bold = True
    elif change == "level":
        first.placeholders[1].text_frame.paragraphs[1].level = 1
    elif change == "slide":
        prs.slides.add_slide(prs.slide_layouts[6])
    elif change == "master":
        prs.slide_master.background.fill.solid()
        prs.slide_master.background.fill.fore_color.rgb = RGBColor(0x00, 0xA9, 0x33)
    buffer = io.BytesIO()
    prs.save(buffer)
    return buffer.getvalue()


CHANGES = ("", "background", "note", "word", "size", "colour", "bold", "not-bold", "underline", "strike",
           "align", "moved", "nudged", "cell", "level", "slide", "master")
OPTION_SETS = ({}, {"examine_shape": False}, {"examine_background_color": False, "examine_note": False},
               {"examine_font_size": False, "examine_color_rgb": False, "examine_font_bold": False,
                "examine_strike_through": False, "examine_font_underline": False},
               {"examine_number_of_slides": False, "examine_alignment": False, "examine_text": False,
                "examine_indent": False},
               {"approximately_tolerance": 0.0001}, {"examine_modify_height": True, "examine_shape": False},
               {"examine_image_size": True, "examine_shape_for_shift_size": True})


@pytest.fixture(scope="module")
def decks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("decks")
    out = {}
    for change in CHANGES:
        path = folder / f"deck-{change or 'plain'}.pptx"
        path.write_bytes(_deck(change))
        out[change or "plain"] = str(path)
    out["gold"] = str(GOLD)
    return out


def test_compare_pptx_files_matches_upstream(theirs, decks):
    """Same scores as desktop-env for the plain deck against every other deck (both ways) and
    the gold against itself, under every option set; and the comparison does tell the decks
    apart (a metric that always agrees would pass too)."""
    plain = decks["plain"]
    pairs = [(plain, other) for other in decks.values()] + [(other, plain) for other in decks.values()]
    pairs.append((decks["gold"], decks["gold"]))
    scores = []
    for (first, second), options in itertools.product(pairs, OPTION_SETS):
        expected = theirs["compare_pptx_files"](first, second, **options)
        got = ours.compare_pptx_files(first, second, **options)
        assert got == expected, (first, second, options, got, expected)
        scores.append(got)
    assert 0.0 in scores and 1.0 in scores
    assert [ours.compare_pptx_files(plain, decks[c]) for c in CHANGES[1:]].count(0.0) >= 13


def test_compare_pptx_files_gives_zero_for_a_missing_file(decks):
    assert ours.compare_pptx_files(None, decks["plain"]) == 0.0
    assert ours.compare_pptx_files(decks["plain"] + ".missing", decks["plain"]) == 0.0


def _with_transition(source: str, target: Path, element: str, part: str = "ppt/slides/slide1.xml") -> str:
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == part:
                data = data.replace(b"</p:sld>", b"<p:transition>" + element.encode() + b"</p:transition></p:sld>")
            zout.writestr(info, data)
    return str(target)


def test_check_transition_matches_upstream(theirs, decks, tmp_path):
    inputs = [decks["plain"], decks["gold"],
              _with_transition(decks["plain"], tmp_path / "dissolve.pptx", "<p:dissolve/>"),
              _with_transition(decks["plain"], tmp_path / "push.pptx", '<p:push dir="l"/>'),
              _with_transition(decks["plain"], tmp_path / "second.pptx", "<p:dissolve/>", "ppt/slides/slide2.xml")]
    for path, idx, kind in itertools.product(inputs, (0, 1, 5), ("dissolve", "push")):
        rules = {"slide_idx": idx, "transition_type": kind}
        assert ours.check_transition(path, rules) == theirs["check_transition"](path, rules), (path, rules)
    assert ours.check_transition(inputs[2], {"slide_idx": 0, "transition_type": "dissolve"}) == 1.0
    assert ours.check_transition(inputs[3], {"slide_idx": 0, "transition_type": "dissolve"}) == 0.0


XCU = ('<?xml version="1.0" encoding="UTF-8"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">'
       '<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSave" oor:op="fuse">'
       '<value>true</value></prop></item>{}</oor:items>')
INTERVAL = ('<item oor:path="/org.openoffice.Office.Common/Save/Document">'
            '<prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>{}</value></prop></item>')


def test_check_auto_saving_time_matches_upstream(theirs, tmp_path):
    cases = {"three": INTERVAL.format(3), "ten": INTERVAL.format(10), "none": "",
             "two-entries": INTERVAL.format(3) + INTERVAL.format(7), "last-wins": INTERVAL.format(7) + INTERVAL.format(3)}
    for name, body in cases.items():
        path = tmp_path / f"{name}.xcu"
        path.write_text(XCU.format(body))
        for minutes in (3, 10):
            assert ours.check_auto_saving_time(str(path), {"minutes": minutes}) == \
                theirs["check_auto_saving_time"](str(path), {"minutes": minutes}), (name, minutes)
    assert ours.check_auto_saving_time(str(tmp_path / "three.xcu"), {"minutes": 3}) == 1.0
