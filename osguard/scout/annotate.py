"""``osguard annotate``: a local labelling page for action-level items.

A stdlib HTTP server bound to 127.0.0.1 serves one page (``annotate_page.html``) and a
small JSON API:

- ``GET /api/items?annotator=NAME``: the items as an annotator sees them (instruction,
  screenshot URL, accessibility tree, shell output, candidate action, and for
  risk-augmented items the invariant-derived hint) plus that annotator's labels so far.
  The construction source, the provisional label of other sources and the provenance
  (with a proposer's invented task) are not sent: annotators judge from what a guardrail
  sees.
- ``POST /api/label`` ``{item_id, label, annotator}``: appended to
  ``annotations.jsonl`` with fsync *before* the reply, so a label the page shows as saved
  survives a crash. Writes need the header ``X-Osguard-Token`` carrying the session token
  the page was served with (a fresh secret per server), and an ``Origin``, when sent, of
  this server; otherwise 403. Any page the annotator visits could post to 127.0.0.1, so
  neither is optional.
- ``GET /api/agreement``: Cohen's and Fleiss' κ, invariant-vs-human agreement.
- ``GET /images/<file>``: screenshots from ``ITEMS_DIR/images`` only.

Every request must name this server in ``Host`` (``127.0.0.1:PORT`` or
``localhost:PORT``), so a DNS-rebinding page cannot read or write through another name.

Several annotators can share one server (``?annotator=NAME`` in the URL) or run their own.
"""

from __future__ import annotations

import hmac
import html
import json
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from osguard.scout.annotations import AnnotationLog, agreement_report, render_agreement
from osguard.scout.items import IMAGES_DIR, Item, load_items
from osguard.scout.types import LABELS, ScoutError

_MAX_BODY = 1 << 20  # a label is a few hundred bytes
_IMAGE_NAME = re.compile(r"^[A-Za-z0-9._-]+\.(png|jpg|jpeg)$")


def annotator_view(item: Item) -> dict[str, Any]:
    """The fields of ``item`` an annotator sees (the guardrail's inputs, plus a hint)."""
    hint = None
    if item.label_origin == "invariant" and item.label is not None:
        hint = {"label": item.label,
                "why": ("this action first broke a safety invariant in its run" if item.label == "unsafe"
                        else "no safety invariant was broken by this action in its run")}
    elif item.label_origin == "lookahead" and item.label is not None:
        violated = (item.provenance.get("lookahead") or {}).get("violated") or []
        hint = {"label": item.label,
                "why": (f"executed ahead, this action broke: {', '.join(violated)}" if item.label == "unsafe"
                        else "executed ahead, this action completed the task and broke no invariant"
                        if item.label == "allowed" else
                        "executed ahead, this action broke no invariant and did not complete the task")}
    return {"id": item.id, "instruction": item.instruction, "action": item.action.to_json(),
            "screenshot": (f"/images/{Path(item.screenshot).name}" if item.screenshot else None),
            "accessibility_tree": item.accessibility_tree, "shell_output": item.shell_output,
            "candidate_index": item.candidate_index, "hint": hint}


TOKEN_HEADER = "X-Osguard-Token"


def page_html(annotator: str, token: str = "") -> str:
    """The annotation page with the default annotator name and the session token filled in."""
    template = resources.files("osguard.scout").joinpath("annotate_page.html").read_text(encoding="utf-8")
    return (template.replace("{{ANNOTATOR}}", html.escape(annotator, quote=True))
            .replace("{{TOKEN}}", html.escape(token, quote=True)))


class AnnotationServer:
    """The annotation page for one items directory, on 127.0.0.1 (context manager).

    Args:
        items_dir: an items directory (``items.jsonl``, ``images/``).
        annotator: the default annotator name (the page can switch with ``?annotator=``).
        port: the port to bind; 0 picks a free one.
    """

    def __init__(self, items_dir: str | Path, annotator: str, port: int = 0) -> None:
        if not annotator.strip():
            raise ScoutError("--annotator: expected a non-empty name")
        self.items_dir = Path(items_dir)
        self.items = load_items(self.items_dir)
        self.by_id = {item.id: item for item in self.items}
        self.annotator = annotator.strip()
        self.log = AnnotationLog(self.items_dir)
        self.token = secrets.token_urlsafe(32)  # this session's write token (in the page)
        self._requested_port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "AnnotationServer":
        """Bind and serve in a background thread."""
        try:
            httpd = ThreadingHTTPServer(("127.0.0.1", self._requested_port), _handler(self))
        except OSError as exc:
            raise ScoutError(f"cannot listen on 127.0.0.1:{self._requested_port}: {exc.strerror}") from None
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="annotate-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self) -> "AnnotationServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the annotation server is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/"

    def serve_forever(self) -> None:
        """Serve until interrupted (the CLI's foreground mode)."""
        if self._thread is None:
            self.start()
        assert self._thread is not None
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        finally:
            self.stop()

    # -- API ---------------------------------------------------------------------
    def items_payload(self, annotator: str) -> dict[str, Any]:
        latest = self.log.latest()
        labels = {item_id: by[annotator] for item_id, by in latest.items()
                  if annotator in by and item_id in self.by_id}
        return {"annotator": annotator, "labels": list(LABELS), "items": [annotator_view(i) for i in self.items],
                "given": labels}

    def save_label(self, payload: Any) -> dict[str, Any]:
        if not isinstance(payload, dict):
            raise ScoutError("expected a JSON object {item_id, label, annotator}")
        item_id, label = payload.get("item_id"), payload.get("label")
        annotator = str(payload.get("annotator") or self.annotator)
        if item_id not in self.by_id:
            raise ScoutError(f"unknown item {item_id!r}")
        record = self.log.append(str(item_id), annotator, str(label))
        done = sum(1 for by in self.log.latest().values() if annotator in by)
        return {"saved": True, "record": record, "done": done, "total": len(self.items)}

    def allowed_hosts(self) -> set[str]:
        """The ``Host`` values (and, with ``http://``, the origins) that name this server."""
        assert self._httpd is not None
        port = self._httpd.server_address[1]
        return {f"127.0.0.1:{port}", f"localhost:{port}"}

    def refusal(self, headers: Any, write: bool) -> str | None:
        """Why a request must be refused (403), or None. Every request must name this
        server in ``Host``; a write must also come from this server's page (``Origin``,
        when the browser sends it) and carry the session token."""
        hosts = self.allowed_hosts()
        if headers.get("Host") not in hosts:
            return f"unexpected Host {headers.get('Host')!r}: open the page at {self.url}"
        if not write:
            return None
        origin = headers.get("Origin")
        if origin is not None and origin not in {f"http://{h}" for h in hosts}:
            return f"cross-origin write from {origin!r} refused"
        if not hmac.compare_digest(headers.get(TOKEN_HEADER, ""), self.token):
            return f"missing or wrong {TOKEN_HEADER}: reload the page"
        return None

    def agreement_payload(self) -> dict[str, Any]:
        report = agreement_report(self.items, self.log.latest())
        return {"report": report, "text": render_agreement(report)}


def _handler(server: AnnotationServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "osguard-annotate/1"
        disable_nagle_algorithm = True  # no delayed-ACK stall between headers and body

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, payload: Any) -> None:
            self._send(status, json.dumps(payload, ensure_ascii=False).encode(), "application/json; charset=utf-8")

        def do_GET(self) -> None:  # noqa: N802
            refused = server.refusal(self.headers, write=False)
            if refused:
                self._json(403, {"error": refused})
                return
            url = urlparse(self.path)
            query = parse_qs(url.query)
            annotator = (query.get("annotator") or [server.annotator])[0].strip() or server.annotator
            if url.path in ("/", "/index.html"):
                self._send(200, page_html(annotator, server.token).encode(), "text/html; charset=utf-8")
            elif url.path == "/api/items":
                self._json(200, server.items_payload(annotator))
            elif url.path == "/api/agreement":
                self._json(200, server.agreement_payload())
            elif url.path.startswith("/images/"):
                name = url.path[len("/images/"):]
                path = server.items_dir / IMAGES_DIR / name
                if not _IMAGE_NAME.match(name) or not path.is_file():
                    self._json(404, {"error": f"no image {name}"})
                    return
                kind = "image/png" if name.endswith(".png") else "image/jpeg"
                self._send(200, path.read_bytes(), kind)
            else:
                self._json(404, {"error": f"no route {url.path}"})

        def do_POST(self) -> None:  # noqa: N802
            url = urlparse(self.path)
            try:
                length = max(0, min(int(self.headers.get("Content-Length") or 0), _MAX_BODY))
            except ValueError:
                length = 0
            body = self.rfile.read(length) if length else b""
            refused = server.refusal(self.headers, write=True)
            if refused:
                self._json(403, {"error": refused})
                return
            if url.path != "/api/label":
                self._json(404, {"error": f"no route {url.path}"})
                return
            try:
                payload = json.loads(body or b"null")
                self._json(200, server.save_label(payload))
            except ValueError:
                self._json(400, {"error": "the body must be JSON"})
            except ScoutError as exc:
                self._json(400, {"error": str(exc)})

    return Handler
