"""Annotation: the durable log, gold labels, κ, and the page's JSON API on loopback."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from osguard.scout import ScoutError
from osguard.scout.annotate import TOKEN_HEADER, AnnotationServer
from osguard.scout.annotations import (
    AnnotationLog,
    agreement_report,
    cohen_kappa,
    fleiss_kappa,
    gold_labels,
    majority,
)
from osguard.scout.build import build_items
from osguard.scout.items import load_items


def test_cohen_kappa_hand_computed():
    a = ["allowed", "allowed", "unsafe", "unsafe", "unrelated", "allowed"]
    b = ["allowed", "unsafe", "unsafe", "unsafe", "unrelated", "allowed"]
    # observed 5/6; expected: allowed 3*2, unsafe 2*3, unrelated 1*1 -> 13/36
    assert cohen_kappa(a, b) == pytest.approx((5 / 6 - 13 / 36) / (1 - 13 / 36))
    assert cohen_kappa(["allowed"] * 3, ["allowed"] * 3) is None
    assert cohen_kappa([], []) is None


def test_fleiss_kappa_textbook_example():
    # Wikipedia's Fleiss example reduced to 3 categories is not standard; use a hand case:
    ratings = [["allowed", "allowed", "allowed"], ["unsafe", "unsafe", "allowed"], ["unrelated"] * 3]
    # P_i = 1, 1/3, 1 -> P̄ = 7/9 ; p = allowed 4/9, unsafe 2/9, unrelated 3/9 -> Pe = 29/81
    assert fleiss_kappa(ratings) == pytest.approx((7 / 9 - 29 / 81) / (1 - 29 / 81))
    with pytest.raises(ValueError):
        fleiss_kappa([["allowed"], ["allowed"]])


def test_majority_tie_goes_to_severity():
    assert majority(["allowed", "unsafe"]) == "unsafe"
    assert majority(["allowed", "allowed", "unsafe"]) == "allowed"
    assert majority(["unrelated", "allowed"]) == "unrelated"


def test_log_is_append_only_latest_wins_and_survives_torn_line(tmp_path):
    log = AnnotationLog(tmp_path)
    log.append("i1", "alice", "allowed")
    log.append("i1", "alice", "unsafe")
    log.append("i1", "bob", "unsafe")
    with open(log.path, "a") as fh:
        fh.write('{"item_id": "i2", "annot')  # a crash mid-write
    assert len(log.path.read_text().splitlines()) == 4
    assert log.latest() == {"i1": {"alice": "unsafe", "bob": "unsafe"}}
    with pytest.raises(ScoutError) as info:
        log.append("i1", "alice", "bad")
    assert str(info.value) == "label 'bad': expected one of allowed, unrelated, unsafe"


def test_gold_and_invariant_agreement(runs, tmp_path):
    out = tmp_path / "items"
    build_items([runs["variants"]], out)
    items = load_items(out)
    unsafe = next(i for i in items if i.label == "unsafe")
    allowed = next(i for i in items if i.label == "allowed")
    log = AnnotationLog(out)
    log.append(unsafe.id, "alice", "unsafe")
    log.append(unsafe.id, "bob", "unsafe")
    log.append(allowed.id, "alice", "unrelated")
    log.append(allowed.id, "bob", "allowed")
    gold = gold_labels(items, log.latest())
    assert gold[unsafe.id] == ("unsafe", "human")
    assert gold[allowed.id] == ("unrelated", "human")  # tie -> more severe
    other = next(i for i in items if i.id not in (unsafe.id, allowed.id))
    assert gold[other.id] == (other.label, "invariant")
    report = agreement_report(items, log.latest())
    assert report["annotators"] == ["alice", "bob"]
    assert report["pairs"][0]["items"] == 2 and report["pairs"][0]["agreement"] == 0.5
    assert report["fleiss"]["items"] == 2
    assert report["invariant_vs_human"]["items"] == 2
    assert report["invariant_vs_human"]["agree"] == 1


def test_api_serves_allowlisted_view_and_saves_durably(runs, tmp_path):
    out = tmp_path / "items"
    build_items([runs["variants"]], out)
    items = load_items(out)
    with AnnotationServer(out, "alice") as server:
        assert server.url.startswith("http://127.0.0.1:")
        page = httpx.get(server.url)
        assert "unsafe takes precedence" in page.text
        data = httpx.get(server.url + "api/items").json()
        assert data["annotator"] == "alice" and len(data["items"]) == len(items)
        first = data["items"][0]
        assert set(first) == {"id", "instruction", "action", "screenshot", "accessibility_tree",
                              "shell_output", "candidate_index", "hint"}
        assert "risk_augmented" not in json.dumps(data)  # the source is not shown
        image = httpx.get(server.url + first["screenshot"].lstrip("/"))
        assert image.status_code == 200 and image.content[:4] == b"\x89PNG"
        assert httpx.get(server.url + "images/..%2Fitems.jsonl").status_code == 404
        token = _token(page.text)
        saved = httpx.post(server.url + "api/label", json={"item_id": first["id"], "label": "unsafe"},
                           headers={TOKEN_HEADER: token}).json()
        assert saved["saved"] and saved["done"] == 1 and saved["record"]["annotator"] == "alice"
        assert AnnotationLog(out).latest() == {first["id"]: {"alice": "unsafe"}}
        bad = httpx.post(server.url + "api/label", json={"item_id": "nope", "label": "unsafe"},
                         headers={TOKEN_HEADER: token})
        assert (bad.status_code, bad.json()) == (400, {"error": "unknown item 'nope'"})
        bob = httpx.get(server.url + "api/items?annotator=bob").json()
        assert bob["given"] == {}
        agreement = httpx.get(server.url + "api/agreement").json()
        assert agreement["report"]["annotators"] == ["alice"]


def _token(page: str) -> str:
    match = re.search(r'<meta name="osguard-token" content="([^"]+)">', page)
    assert match, "the page carries the session token"
    return match.group(1)


def test_writes_need_this_pages_origin_and_token(runs, tmp_path):
    """Regression: any web page the annotator visited could POST gold labels to the
    annotation server (no Origin check, no token). Real HTTP requests on loopback."""
    out = tmp_path / "items"
    build_items([runs["variants"]], out)
    item_id = load_items(out)[0].id
    body = {"item_id": item_id, "label": "unsafe"}
    with AnnotationServer(out, "alice") as server:
        port = server.url.rsplit(":", 1)[1].rstrip("/")
        token = _token(httpx.get(server.url).text)
        assert token == server.token and len(token) >= 40
        # a page on another origin, even one that somehow knew the token
        evil = httpx.post(server.url + "api/label", json=body,
                          headers={"Origin": "http://attacker.example", TOKEN_HEADER: token})
        assert (evil.status_code, evil.json()) == (
            403, {"error": "cross-origin write from 'http://attacker.example' refused"})
        # a form post or a fetch without the token (no-cors cannot set headers)
        for headers in ({}, {"Origin": f"http://127.0.0.1:{port}"}, {TOKEN_HEADER: "guess"}):
            refused = httpx.post(server.url + "api/label", json=body, headers=headers)
            assert (refused.status_code, refused.json()) == (
                403, {"error": "missing or wrong X-Osguard-Token: reload the page"})
        # DNS rebinding: another name for 127.0.0.1 reaches the socket but not the API
        for path in ("", "api/items"):
            rebound = httpx.get(server.url + path, headers={"Host": f"attacker.example:{port}"})
            assert (rebound.status_code, rebound.json()) == (
                403, {"error": f"unexpected Host 'attacker.example:{port}': open the page at {server.url}"})
        assert AnnotationLog(out).latest() == {}
        ok = httpx.post(f"http://localhost:{port}/api/label", json=body,
                        headers={"Origin": f"http://localhost:{port}", TOKEN_HEADER: token})
        assert ok.status_code == 200 and ok.json()["saved"]
        assert AnnotationLog(out).latest() == {item_id: {"alice": "unsafe"}}
    with AnnotationServer(out, "alice") as again:
        assert again.token != token  # a fresh secret per session
