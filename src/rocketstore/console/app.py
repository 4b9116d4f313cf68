"""The console's web application: a WSGI callable that routes a request to its page,
reads what the page shows (:mod:`.reading`) and renders it with Jinja2.

Layer: console. Pages only read; the actions (``/action/...``: resend a DLQ message,
reset a group's offsets, create a topic) answer 403 unless the console was started with
actions on, and with an ACL they need the HTTP Basic credentials of an account allowed the
request (admin for topic creation and offset resets, PUB on the topic for a resend), as
the broker's own requests would.
"""

from __future__ import annotations

import base64
import datetime as dt
import hmac
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from rocketstore.broker.acl import AclAccount, AclConfig
from rocketstore.broker.acl_permissions import PUB, check_permission
from rocketstore.check.run import check_store
from rocketstore.console import reading
from rocketstore.console.actions import ActionError, Actions
from rocketstore.console.charts import line_chart
from rocketstore.console.rates import live_series, stored_series
from rocketstore.console.source import Snapshot, Source
from rocketstore.errors import StoreError
from rocketstore.format import properties as props
from rocketstore.paths import DLQ_PREFIX

log = logging.getLogger(__name__)

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
Environ = dict[str, Any]


class HttpError(Exception):
    def __init__(self, status: str, message: str, headers: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or []


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    account: AclAccount | None = None

    def text(self, name: str, default: str = "") -> str:
        return self.query.get(name, self.form.get(name, default)).strip()

    def number(self, name: str, default: int | None = None) -> int:
        value = self.text(name)
        if not value:
            if default is None:
                raise HttpError("400 Bad Request", f"{name} is missing")
            return default
        try:
            return int(value)
        except ValueError as e:
            raise HttpError("400 Bad Request", f"{name} must be a number: {value!r}") from e


def parse_time_ms(text: str) -> int:
    """A form's time: epoch ms, or local ``YYYY-MM-DD[T| ]HH:MM[:SS]`` (datetime-local);
    0 for an empty field."""
    text = text.strip()
    if not text:
        return 0
    if text.isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError as e:
        raise HttpError("400 Bad Request", f"not a time: {text!r}") from e
    return int(moment.timestamp() * 1000)


@dataclass
class CheckCache:
    """The last health check's result and when it ran (a check reads every file)."""

    result: Any = None
    ran_ms: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class Console:
    source: Source
    actions_enabled: bool = False
    check: CheckCache = field(default_factory=CheckCache)

    def __post_init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("rocketstore.console", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["time"] = reading.format_ms
        self.env.filters["q"] = lambda value: quote(str(value), safe="")
        self.env.filters["size"] = _size
        self.env.globals["DLQ_PREFIX"] = DLQ_PREFIX
        self.actions = Actions(self.source)
        self.routes: dict[str, Callable[[Request, Snapshot], str]] = {
            "/": self.overview,
            "/topics": self.topics,
            "/topic": self.topic,
            "/groups": self.groups,
            "/group": self.group,
            "/search": self.search,
            "/message": self.message,
            "/dlq": self.dlq,
            "/charts": self.charts,
            "/health": self.health,
        }
        self.css = (
            resources.files("rocketstore.console").joinpath("static/console.css").read_bytes()
        )

    # --- WSGI ---------------------------------------------------------------------------

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        try:
            status, headers, body = self.respond(environ)
        except HttpError as e:
            status, headers = e.status, [("Content-Type", "text/plain; charset=utf-8"), *e.headers]
            body = (str(e) + "\n").encode()
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        # HEAD: the headers a GET would have, no body.
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    def respond(self, environ: Environ) -> tuple[str, list[tuple[str, str]], bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/") or "/"
        query = _first(parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        form: dict[str, str] = {}
        if method == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            raw = environ["wsgi.input"].read(min(length, 1 << 20)) if length else b""
            form = _first(parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True))
        request = Request(method, path, query, form)
        request.account = self.authenticate(environ)
        if path == "/static/console.css":
            return (
                "200 OK",
                [("Content-Type", "text/css"), ("Cache-Control", "max-age=3600")],
                (self.css),
            )
        if path.startswith("/action/"):
            if method != "POST":
                raise HttpError("405 Method Not Allowed", "actions are POST requests")
            _same_origin(environ)
            return self.action(request)
        page = self.routes.get(path)
        if page is None:
            raise HttpError("404 Not Found", f"no page {path}")
        if method not in ("GET", "HEAD"):
            raise HttpError("405 Method Not Allowed", "pages are GET requests")
        with self.source.lock:
            snap = self.source.snapshot()
            try:
                html = page(request, snap)
            except StoreError as e:
                html = self.render("error.html", snap, message=str(e))
                return (
                    "400 Bad Request",
                    [("Content-Type", "text/html; charset=utf-8")],
                    (html.encode()),
                )
        return "200 OK", [("Content-Type", "text/html; charset=utf-8")], html.encode()

    def authenticate(self, environ: Environ) -> AclAccount | None:
        """With an ACL, every request needs an account's HTTP Basic credentials
        (accessKey:secretKey); without one, none is asked."""
        acl: AclConfig | None = self.source.acl
        if acl is None:
            return None
        challenge = [("WWW-Authenticate", 'Basic realm="rocketstore console"')]
        header = environ.get("HTTP_AUTHORIZATION", "")
        if not header.startswith("Basic "):
            raise HttpError("401 Unauthorized", "an ACL account is needed", challenge)
        try:
            user, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError) as e:
            raise HttpError("401 Unauthorized", "bad credentials", challenge) from e
        account = acl.account(user)
        if account is None or not hmac.compare_digest(account.secret_key.encode(), secret.encode()):
            raise HttpError("401 Unauthorized", "unknown account or wrong secret", challenge)
        return account

    def render(self, template: str, snap: Snapshot | None, **values: Any) -> str:
        return self.env.get_template(template).render(
            source=self.source,
            live=self.source.live,
            actions_enabled=self.actions_enabled,
            now=reading.format_ms(int(time.time() * 1000)),
            **values,
        )

    # --- pages --------------------------------------------------------------------------

    def online(self) -> set[str]:
        return self.actions.online_groups()

    def overview(self, request: Request, snap: Snapshot) -> str:
        store = snap.store
        topics = reading.topic_rows(snap, with_system=False)
        return self.render(
            "overview.html",
            snap,
            stats=store.stats(),
            topics=topics,
            messages=sum(t.messages for t in topics),
            groups=reading.group_rows(snap, self.online()),
            disk=reading.disk_of(store.root),
            broker_stats=snap.stats,
        )

    def topics(self, request: Request, snap: Snapshot) -> str:
        with_system = request.text("system") == "1"
        return self.render(
            "topics.html",
            snap,
            topics=reading.topic_rows(snap, with_system=with_system),
            with_system=with_system,
        )

    def topic(self, request: Request, snap: Snapshot) -> str:
        name = request.text("name")
        rows = reading.queue_rows(snap, name)
        config = snap.topics.get(name)
        if not rows and config is None:
            raise HttpError("404 Not Found", f"no topic {name}")
        groups = sorted(snap.offsets.groups_of_topic(name))
        return self.render("topic.html", snap, name=name, queues=rows, config=config, groups=groups)

    def groups(self, request: Request, snap: Snapshot) -> str:
        return self.render("groups.html", snap, groups=reading.group_rows(snap, self.online()))

    def group(self, request: Request, snap: Snapshot) -> str:
        name = request.text("name")
        rows = reading.group_lag(snap, name)
        return self.render(
            "group.html",
            snap,
            name=name,
            rows=rows,
            total=sum(r.lag for r in rows),
            online=name in self.online(),
            config=snap.groups.get(name),
        )

    def search(self, request: Request, snap: Snapshot) -> str:
        by = request.text("by", "key")
        topic = request.text("topic")
        result: reading.SearchResult | None = None
        form = {
            k: request.text(k) for k in ("by", "topic", "key", "begin", "end", "queue", "offset")
        }
        searched = any(form[k] for k in ("key", "begin", "end", "offset")) or by == "time"
        if searched and (topic or by in ("id", "uniq")):
            begin, end = parse_time_ms(form["begin"]), parse_time_ms(form["end"])
            if by == "key":
                result = reading.search_by_key(snap, topic, form["key"], begin, end)
            elif by == "uniq":
                result = reading.search_by_unique_key(snap, topic, form["key"])
            elif by == "id":
                result = reading.search_by_msg_id(snap, topic, form["key"])
            elif by == "time":
                result = reading.search_by_time(snap, topic, begin, end)
            elif by == "offset":
                result = reading.messages_at(
                    snap, topic, request.number("queue", 0), request.number("offset", 0)
                )
            else:
                raise HttpError("400 Bad Request", f"no search by {by}")
        elif searched:
            result = reading.SearchResult(error="a topic is needed for this search")
        return self.render(
            "search.html",
            snap,
            form=form,
            by=by,
            result=result,
            topics=sorted(snap.store.topics()),
        )

    def message(self, request: Request, snap: Snapshot) -> str:
        offset = request.number("offset")
        message = reading.message_at(snap, offset)
        if message is None:
            raise HttpError("404 Not Found", f"no message at CommitLog offset {offset}")
        properties = dict(message.properties)
        return self.render(
            "message.html",
            snap,
            m=message,
            body=reading.body_of(message),
            properties=properties,
            system_names=props.SYSTEM_PROPERTY_NAMES,
            tracks=reading.consume_tracks(
                snap, message, self.online(), self.actions.subscribed_groups(message.topic)
            ),
            view=request.text("view", "text"),
            dlq=message.topic.startswith(DLQ_PREFIX),
        )

    def dlq(self, request: Request, snap: Snapshot) -> str:
        topics = [t for t in reading.topic_rows(snap) if t.kind == "dlq"]
        name = request.text("topic")
        listed = None
        if name:
            listed = reading.messages_at(
                snap, name, request.number("queue", 0), request.number("offset", 0)
            )
        return self.render(
            "dlq.html", snap, topics=topics, name=name, listed=listed, request=request
        )

    def charts(self, request: Request, snap: Snapshot) -> str:
        charts: list[Markup] = []
        step_ms = 0
        if snap.stats is not None:
            charts.append(
                Markup(
                    line_chart(
                        {
                            "put": live_series(snap.stats.put),
                            "get": live_series(snap.stats.get),
                        },
                        title="Messages put and pulled, last 10 minutes",
                        unit="msg/s, 10 s averages",
                    )
                )
            )
        points, step_ms = stored_series(snap)
        charts.append(
            Markup(
                line_chart(
                    {"stored": points},
                    title="Messages stored over the store's span",
                    unit="msg/s per interval, by store time",
                )
            )
        )
        return self.render("charts.html", snap, charts=charts, step_ms=step_ms)

    def health(self, request: Request, snap: Snapshot) -> str:
        if request.text("check") == "1":
            started = time.monotonic()
            try:
                self.check.result = check_store(snap.store.root, snap.store.config)
                self.check.error = None
            except StoreError as e:
                self.check.result, self.check.error = None, str(e)
            self.check.seconds = time.monotonic() - started
            self.check.ran_ms = int(time.time() * 1000)
        store = snap.store
        return self.render(
            "health.html",
            snap,
            stats=store.stats(),
            disk=reading.disk_of(store.root),
            check=self.check,
            missing=store.missing_commitlog_files(),
            unreadable=sorted(store.unreadable_queues.items()),
        )

    # --- actions ------------------------------------------------------------------------

    def action(self, request: Request) -> tuple[str, list[tuple[str, str]], bytes]:
        if not self.actions_enabled:
            raise HttpError(
                "403 Forbidden", "this console is read-only (start it with --console-actions)"
            )
        name = request.path[len("/action/") :]
        try:
            if name == "create-topic":
                self._need_admin(request)
                topic = request.text("topic")
                self.actions.create_topic(
                    topic, request.number("read", 4), request.number("write", 4)
                )
                target = "/topic?" + urlencode({"name": topic})
            elif name == "reset-offset":
                self._need_admin(request)
                group, topic = request.text("group"), request.text("topic")
                self.actions.reset_offset(group, topic, parse_time_ms(request.text("time")))
                target = "/group?" + urlencode({"name": group})
            elif name == "resend":
                offset = request.number("offset")
                with self.source.lock:
                    message = reading.message_at(self.source.snapshot(), offset)
                if message is None:
                    raise HttpError("404 Not Found", f"no message at CommitLog offset {offset}")
                destination = self.actions.resend_destination(message)
                self._need_perm(request, destination, PUB)
                new_offset = self.actions.resend(message, destination)
                target = f"/message?offset={new_offset}"
            else:
                raise HttpError("404 Not Found", f"no action {name}")
        except ActionError as e:
            raise HttpError("409 Conflict", str(e)) from e
        return "303 See Other", [("Location", target), ("Content-Type", "text/plain")], b""

    def _need_admin(self, request: Request) -> None:
        account = request.account
        if self.source.acl is not None and (account is None or not account.admin):
            raise HttpError("403 Forbidden", "this action needs an admin account of the ACL")

    def _need_perm(self, request: Request, topic: str, perm: int) -> None:
        account = request.account
        if self.source.acl is None or account is None:
            return
        if account.admin and not account.resource_perms:
            return
        owned = account.resource_perms.get(topic, account.default_topic_perm)
        if not check_permission(perm, owned):
            raise HttpError(
                "403 Forbidden", f"account {account.access_key} may not send to {topic}"
            )


def _same_origin(environ: Environ) -> None:
    """Refuses an action a page of another site posted (a form on any web page can post to
    a console on loopback): the browser's Origin (or Referer) must name this console's
    host, and Sec-Fetch-Site must not say cross-site. Clients that send none (curl, a
    script) pass: they are not a browser carrying someone's credentials."""
    host = environ.get("HTTP_HOST", "")
    if environ.get("HTTP_SEC_FETCH_SITE", "") == "cross-site":
        raise HttpError("403 Forbidden", "a cross-site request cannot act on this console")
    for header in ("HTTP_ORIGIN", "HTTP_REFERER"):
        value = environ.get(header)
        if value:
            if urlsplit(value).netloc != host:
                raise HttpError("403 Forbidden", "a cross-site request cannot act on this console")
            return


def _first(values: dict[str, list[str]]) -> dict[str, str]:
    return {key: items[0] for key, items in values.items() if items}


def _size(value: int) -> str:
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
