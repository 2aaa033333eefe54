"""``python -m hynea_pl rate``: a local web page on which people rate the runs' flipped results (paper RQ3).

Standard library only (``http.server``): the page is server-rendered HTML forms, no script. Each rater sees every
flipped result of the runs, one at a time, in a seeded per-rater shuffle, without its method (images are
served under an opaque token), and answers "Is this a <class name>?" (Yes / No / Unsure) and realism 1-5. Every
answer is appended to the ratings file at once (fsync'd, :class:`hynea_pl.report.ratings.RatingsFile`); reopening
the page, or restarting the server, continues with what this rater has not rated yet.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from PIL import Image
from pydantic import ValidationError

from hynea_pl.report.ratings import (
    REALISM_LABELS,
    Rating,
    RatingItem,
    RatingsFile,
    now_utc,
    rater_order,
    rating_items,
)

#: Images are shown at least this large (CSS px, nearest-neighbour upscaling by an integer factor).
MIN_DISPLAY_PX = 320
MAX_RATER_CHARS = 100

STYLE = """
body { font-family: sans-serif; max-width: 760px; margin: 2em auto; color: #222; }
img.item { image-rendering: pixelated; border: 1px solid #999; display: block;
           margin: 1em 0; }
fieldset { margin: 1em 0; border: 1px solid #ccc; }
legend { font-weight: bold; font-size: 1.15em; }
label { margin-right: 1.2em; font-size: 1.1em; cursor: pointer; }
button { font-size: 1.1em; padding: 0.4em 1.4em; }
.progress { color: #666; }
"""


def _page(title: str, body: str) -> bytes:
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>").encode()


def clean_rater(name: str | None) -> str | None:
    """A rater's name as typed (trimmed); ``None`` when empty or too long."""
    name = (name or "").strip()
    return name if 0 < len(name) <= MAX_RATER_CHARS else None


class RatingApp:
    """What the pages show and save: the items, their per-rater order and the ratings file. ``rater`` fixes the
    rater (``--rater``); otherwise the first page asks for a name."""

    def __init__(self, items: Sequence[RatingItem], ratings: RatingsFile, rater: str | None = None,
                 seed: int = 0) -> None:
        self.items = list(items)
        self.by_token = {item.token: item for item in self.items}
        self.ratings = ratings
        self.rater = rater
        self.seed = seed
        self._sizes: dict[str, tuple[int, int]] = {}

    def queue(self, rater: str) -> list[RatingItem]:
        """The rater's items not rated yet, in the rater's order."""
        done = self.ratings.rated_by(rater)
        return [item for item in rater_order(self.items, rater, self.seed) if item.item not in done]

    def display_size(self, item: RatingItem) -> tuple[int, int]:
        """The image's size on the page: upscaled by the integer factor that makes its longer side at least
        :data:`MIN_DISPLAY_PX`."""
        if item.token not in self._sizes:
            with Image.open(item.image) as image:
                width, height = image.size
            factor = max(1, math.ceil(MIN_DISPLAY_PX / max(width, height, 1)))
            self._sizes[item.token] = (width * factor, height * factor)
        return self._sizes[item.token]

    def name_page(self) -> bytes:
        return _page("Rate images", (
            "<h1>Rate images</h1><form method=\"get\" action=\"/\"><label>Your name "
            "<input type=\"text\" name=\"rater\" id=\"rater\" required maxlength=\"100\" autofocus></label> "
            "<button type=\"submit\" id=\"start\">Start</button></form>"))

    def item_page(self, rater: str) -> bytes:
        queue = self.queue(rater)
        done = len(self.items) - len(queue)
        who = html.escape(rater)
        if not queue:
            return _page("Done", f"<h1>Thank you, {who}</h1><p id=\"done\">All {len(self.items)} images are "
                                 "rated. You can close this page.</p>")
        item = queue[0]
        width, height = self.display_size(item)
        answers = "".join(
            f"<label><input type=\"radio\" name=\"answer\" value=\"{value}\" id=\"answer-{value}\" required> "
            f"{value.capitalize()}</label>" for value in ("yes", "no", "unsure"))
        realism = "".join(
            f"<label title=\"{html.escape(text)}\"><input type=\"radio\" name=\"realism\" value=\"{score}\" "
            f"id=\"realism-{score}\" required> {score}</label>" for score, text in REALISM_LABELS.items())
        body = (
            f"<p class=\"progress\" id=\"progress\">Image {done + 1} of {len(self.items)} &middot; rater {who}</p>"
            f"<img class=\"item\" id=\"item-image\" src=\"/image/{item.token}\" width=\"{width}\" height=\"{height}\" "
            f"alt=\"image to rate\">"
            f"<form method=\"post\" action=\"/rate\" id=\"rating-form\">"
            f"<input type=\"hidden\" name=\"rater\" value=\"{who}\">"
            f"<input type=\"hidden\" name=\"token\" value=\"{item.token}\">"
            f"<fieldset><legend id=\"question\">{html.escape(item.question)}</legend>{answers}</fieldset>"
            f"<fieldset><legend>How realistic is this image? (1 = {REALISM_LABELS[1]}, 5 = {REALISM_LABELS[5]})"
            f"</legend>{realism}</fieldset>"
            f"<button type=\"submit\" id=\"submit\">Save and next</button></form>")
        return _page(f"Rate image {done + 1} of {len(self.items)}", body)

    def submit(self, form: Mapping[str, str]) -> str:
        """Save one answer from the page's form; returns the rater. ``ValueError`` for a form that does not fit."""
        rater = clean_rater(form.get("rater"))
        if rater is None or (self.rater is not None and rater != self.rater):
            raise ValueError("unknown rater")
        item = self.by_token.get(form.get("token", ""))
        if item is None:
            raise ValueError("unknown image")
        try:
            rating = Rating(rater=rater, item=item.item, run=item.run, case_id=item.case_id,
                            origin_class=item.origin_class, question=item.question, answer=form.get("answer", ""),
                            realism=form.get("realism", ""), time=now_utc())
        except ValidationError:
            raise ValueError("answer the question and rate the realism (1-5)") from None
        self.ratings.append(rating)
        return rater


def _handler(app: RatingApp) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "hynea-rate"

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per request would bury the server's own output

        def _send(self, status: HTTPStatus, body: bytes, content_type: str = "text/html; charset=utf-8",
                  location: str | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            if location:
                self.send_header("Location", location)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/":
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                rater = app.rater or clean_rater(query.get("rater"))
                self._send(HTTPStatus.OK, app.item_page(rater) if rater else app.name_page())
            elif url.path.startswith("/image/") and url.path[7:] in app.by_token:
                self._send(HTTPStatus.OK, app.by_token[url.path[7:]].image.read_bytes(), "image/png")
            else:
                self._send(HTTPStatus.NOT_FOUND, _page("Not found", "<p>Not found</p>"))

        def do_POST(self) -> None:
            if urlsplit(self.path).path != "/rate":
                self._send(HTTPStatus.NOT_FOUND, _page("Not found", "<p>Not found</p>"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode("utf-8")).items()}
            try:
                rater = app.submit(form)
            except ValueError as error:
                self._send(HTTPStatus.BAD_REQUEST, _page("Not saved", f"<p id=\"error\">Not saved: "
                                                                      f"{html.escape(str(error))}. Go back and try "
                                                                      "again.</p>"))
                return
            # 303: the browser loads the next image with GET, a reload never resubmits the answer
            self._send(HTTPStatus.SEE_OTHER, b"", location="/?rater=" + quote(rater))

    return Handler


def make_server(app: RatingApp, host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    """The HTTP server of ``app`` (port 0: a free port, ``server.server_address[1]``)."""
    server = ThreadingHTTPServer((host, port), _handler(app))
    server.daemon_threads = True
    return server


def build_app(run_dirs: Sequence[Path], ratings_path: Path, rater: str | None = None, seed: int = 0,
              class_names: Mapping[int, str] | None = None) -> RatingApp:
    """The app over the runs' flipped results; ``ValueError`` when there is none or the rater's name is bad."""
    items = rating_items(run_dirs, class_names)
    if not items:
        raise ValueError(f"no flipped result with an image in {', '.join(str(d) for d in run_dirs)}")
    if rater is not None and clean_rater(rater) is None:
        raise ValueError(f"--rater must be 1-{MAX_RATER_CHARS} characters")
    return RatingApp(items, RatingsFile(ratings_path), clean_rater(rater) if rater else None, seed)


__all__ = ["MIN_DISPLAY_PX", "RatingApp", "build_app", "clean_rater", "make_server"]
