"""The console's web application (Starlette): one route per page, each rendering a Jinja2
template from the data its module gathers. Route functions are plain (sync) functions:
Starlette runs them in its thread pool, which suits the admin code's blocking clients and
keeps a slow broker from stalling other requests.

A request with htmx's `HX-Request` header gets the page's live part only (htmx polls it
to refresh the tables); charts fetch their series as JSON from /api/... Writes are POSTs
refused unless the console runs with --allow-writes, and only from htmx (a cross-site
form cannot set HX-Request without a CORS preflight the console never grants).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import escape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..admin.groups import AdminError
from ..wire.client_properties import SecurityConfigError
from ..wire.client_security import AuthenticationError
from . import acls_quotas, groups, overview, share_groups, topics, transactions, writes
from .connection import CoordinatorError, Target
from .history import History

HERE = Path(__file__).parent
log = logging.getLogger("headwater.console")
#: what a page shows as its error banner rather than a traceback
BROKER_ERRORS = (AdminError, OSError, AuthenticationError, SecurityConfigError,
                 CoordinatorError)


@dataclass
class Settings:
    target: Target
    history: History
    allow_writes: bool = False
    refresh_s: float = 5.0


def _time(epoch_ms: int | None) -> str:
    if epoch_ms is None or epoch_ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(epoch_ms / 1000, datetime.UTC).strftime(
        "%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


def create_app(settings: Settings) -> Starlette:  # noqa: C901
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters["time"] = _time
    templates.env.filters["size"] = _size
    target = settings.target

    def page(request: Request, name: str, gather: Callable[[], dict[str, Any]],
             title: str) -> Response:
        """Render `name` (or its live part for htmx) with what `gather` returns; a broker
        error becomes the page's banner with status 502."""
        context: dict[str, Any] = {"title": title, "settings": settings, "error": None}
        status = 200
        try:
            context.update(gather())
        except BROKER_ERRORS as exc:
            context["error"] = str(exc)
            status = 502
        live = request.headers.get("HX-Request") == "true" and \
            request.headers.get("HX-Target") == "live"
        template = f"{name}_live.html" if live else f"{name}.html"
        return templates.TemplateResponse(request, template, context, status_code=status)

    def index(request: Request) -> Response:
        return page(request, "overview", lambda: overview.gather(target), "Overview")

    def topic(request: Request) -> Response:
        name = request.path_params["name"]

        def gather() -> dict[str, Any]:
            found = topics.describe(target, name)
            q = request.query_params
            browse = _browse_form(q)
            records = None
            if browse["partition"] is not None:
                records = topics.browse(target, name, browse["partition"], browse["offset"],
                                        browse["timestamp"], browse["key"])
            return {"topic": name, "described": found, "browse": browse, "records": records}

        return page(request, "topic", gather, f"Topic {name}")

    def group(request: Request) -> Response:
        name = request.path_params["name"]
        return page(request, "group", lambda: {"group": groups.describe(target, name)},
                    f"Group {name}")

    def share_group(request: Request) -> Response:
        name = request.path_params["name"]
        return page(request, "share_group",
                    lambda: {"group": share_groups.describe(target, name)},
                    f"Share group {name}")

    def txns(request: Request) -> Response:
        return page(request, "transactions",
                    lambda: {"transactions": transactions.gather(target)}, "Transactions")

    def acls_and_quotas(request: Request) -> Response:
        def gather() -> dict[str, Any]:
            rows, why = acls_quotas.acls(target)
            return {"acls": rows, "acls_note": why, "quotas": acls_quotas.quotas(target)}

        return page(request, "security", gather, "ACLs and quotas")

    def series(request: Request) -> Response:
        kind = request.path_params["kind"]
        group_id = request.query_params.get("group")
        h = settings.history
        if kind == "throughput":
            data = h.throughput()
        elif kind == "lag":
            data = h.lag(lambda s: s.group_lag, group_id)
        elif kind == "share-lag":
            data = h.lag(lambda s: s.share_lag, group_id)
        else:
            return JSONResponse({"error": f"no series {kind}"}, status_code=404)
        return JSONResponse(data)

    async def write(request: Request) -> Response:
        if not settings.allow_writes:
            return HTMLResponse('<p class="error" id="write-result">writes are off: start '
                                'the console with --allow-writes</p>', status_code=403)
        if request.headers.get("HX-Request") != "true":
            return HTMLResponse('<p class="error" id="write-result">a write must come from '
                                'the console\'s own page (HX-Request)</p>', status_code=403)
        form = {k: str(v) for k, v in (await request.form()).items()}
        action = request.path_params["action"]
        try:
            if action == "create-topic":
                text = await run_in_threadpool(writes.create_topic, target, form["name"],
                                               int(form.get("partitions") or 1))
            elif action == "delete-acl":
                text = await run_in_threadpool(
                    writes.delete_acl, target, form["principal"], form["permission"],
                    form["operation"], form["host"], form["resource"], form["name"],
                    form["pattern"])
            else:
                return HTMLResponse("unknown action", status_code=404)
        except (*BROKER_ERRORS, KeyError, ValueError) as exc:
            return HTMLResponse(f'<p class="error" id="write-result">{_escape(str(exc))}</p>',
                                status_code=400)
        log.info("console write %s: %s", action, text)
        return HTMLResponse(f'<p class="ok" id="write-result">{_escape(text)}</p>')

    return Starlette(routes=[
        Route("/", index),
        Route("/topics/{name:path}", topic),
        Route("/groups/{name:path}", group),
        Route("/share-groups/{name:path}", share_group),
        Route("/transactions", txns),
        Route("/security", acls_and_quotas),
        Route("/api/series/{kind}", series),
        Route("/actions/{action}", write, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ])


def _escape(text: str) -> str:
    return str(escape(text))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _browse_form(q: Any) -> dict[str, Any]:
    """The record browser's query: partition, and offset, timestamp (ms or ISO-8601) or
    key."""
    ts = q.get("timestamp") or None
    stamp = _int(ts)
    if ts and stamp is None:
        try:
            dt = datetime.datetime.fromisoformat(ts)
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=datetime.UTC)
            stamp = int(dt.timestamp() * 1000)
        except ValueError:
            stamp = None
    return {"partition": _int(q.get("partition")), "offset": _int(q.get("offset")),
            "timestamp": stamp, "timestamp_text": ts or "",
            "key": q.get("key") or None}
