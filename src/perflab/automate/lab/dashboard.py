"""`perflab serve`: the lab's live dashboard, read-only, from the store (and the broker).

Pages (GET only; anything else is 405):
  /            the boxes and their queues (when a broker is given), recent runs, recent
               regressions found by `perflab robot`
  /run/ID      one run: its fields, parameters, environment and a summary of each metric
               (what `perflab show ID` prints); the recent runs on / link to it
  /report      the HTML report of perflab.report.html (the same builder as `report html`),
               with its filters as query parameters: benchmark, box, tag, metric, operand
               (repeatable), cross_box=1
Standard library server (threads), bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import html
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from perflab.core.errors import PerflabError

STYLE = """body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border-bottom:1px solid #ddd;padding:.25em .7em;text-align:left}th{background:#f3f3f3}
.failed,.interrupted{color:#b00}.running{color:#06c}code{font-size:90%}"""


def _table(id_: str, header: list[str], rows: list[list[str]], classes: list[str] | None = None,
           links: list[str] | None = None) -> str:
    """An HTML table; `links`: each row's first cell links there."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{html.escape(classes[i])}"' if classes else ""
        cells = [html.escape(str(c)) for c in row]
        if links and cells:
            cells[0] = f"<a href='{html.escape(links[i])}'>{cells[0]}</a>"
        body.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    if not rows:
        body.append(f'<tr><td colspan="{len(header)}">none</td></tr>')
    return f'<table id="{id_}"><tr>{head}</tr>{"".join(body)}</table>'


class Dashboard:
    def __init__(self, store, broker: str | None = None, recent: int = 50):
        self.store, self.broker, self.recent = store, broker, recent
        self._lock = threading.Lock()   # one store reader at a time (an SQLite connection pool is small)

    def index(self) -> str:
        from sqlalchemy import select

        from perflab.store import schema as s

        parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>perflab lab</title>"
                 f"<meta http-equiv='refresh' content='10'><style>{STYLE}</style></head><body>",
                 f"<h1>perflab lab</h1><p>store {html.escape(self.store.label)} · <a href='/report'>report</a></p>"]
        parts.append("<h2>Boxes and queues</h2>")
        if self.broker:
            try:
                from perflab.automate.lab import client

                rows = client.queue_status(self.broker)
                parts.append(_table("boxes", ["box", "machine", "queued", "state", "since", "job", "submission",
                                              "spooled", "worker", "last error"],
                                    [[r["box"], r["machine"], r["queued"], r["state"], r["since"], r["job"],
                                      r["submission"], r["spooled"], r["worker"], r["last_error"]] for r in rows],
                                    [r["state"].replace(" ", "-") for r in rows]))
            except PerflabError as e:
                parts.append(f"<p class='failed' id='boxes'>{html.escape(str(e))}</p>")
        else:
            parts.append("<p id='boxes'>no broker given (perflab serve --broker URL)</p>")
        with self._lock:
            runs = self.store.find_runs()[-self.recent:][::-1]
            with self.store.engine.connect() as conn:
                reports = conn.execute(select(s.robot_report.c.created, s.robot_report.c.robot, s.robot_report.c.metric,
                                              s.robot_report.c.culprit, s.robot_report.c.subject)
                                       .order_by(s.robot_report.c.id.desc()).limit(20)).all()
        parts.append("<h2>Recent runs</h2>")
        # A run is labelled by what it measured as well as by its id: the kernel under test.
        parts.append(_table("runs", ["run", "started (UTC)", "box", "kernel", "name", "tag", "status", "error"],
                            [[r.id, f"{r.started:%Y-%m-%d %H:%M:%S}", r.box,
                              (r.environment or {}).get("kernel_release", "") if isinstance(r.environment, dict)
                              else "", r.name, r.tag or "", r.status,
                              (r.error or "")[:120]] for r in runs], [r.status for r in runs],
                            [f"/run/{r.id}" for r in runs]))
        parts.append("<h2>Recent regressions (perflab robot)</h2>")
        parts.append(_table("regressions", ["found (UTC)", "robot", "metric", "culprit", "subject"],
                            [[f"{r.created:%Y-%m-%d %H:%M}", r.robot, r.metric, r.culprit[:12], r.subject] for r in reports]))
        parts.append("</body></html>")
        return "".join(parts)

    def run_page(self, run_id: str) -> str:
        """One run, as `perflab show` tells it: fields, parameters, failures, each metric's summary."""
        from perflab.stats.descriptive import summarize

        with self._lock:
            run = self.store.get_run(run_id)
            failures = self.store.failures([run.id])
            samples = self.store.samples([run.id])
        by_metric: dict[str, list] = {}
        for smp in samples:
            by_metric.setdefault(smp.metric, []).append(smp)
        esc = html.escape
        fields = [["benchmark", run.benchmark], ["name", run.name], ["status", run.status + (f" ({run.error})" if run.error else "")],
                  ["started (UTC)", f"{run.started:%Y-%m-%d %H:%M:%S}"], ["testbox", run.box], ["tag", run.tag or ""],
                  ["commit", (run.commit or "")[:12] + ("+dirty" if run.dirty else "")], ["comment", run.comment or ""]]
        fields += [[f"param {k}", v] for k, v in (run.params or {}).items() if v not in (None, [], {})]
        rows = []
        for metric, items in by_metric.items():
            st = summarize([x.value for x in items], items[0].direction)
            rows.append([metric, items[0].unit, st.n, f"{st.mean:.6g}", f"{st.median:.6g}",
                         f"{st.stddev:.4g}" if st.n > 1 else "-", f"{st.min:.6g}", f"{st.max:.6g}"])
        parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>perflab run #{run.id}</title>"
                 f"<style>{STYLE}</style></head><body><p><a href='/'>lab</a></p>",
                 f"<h1>run #{run.id}: {esc(run.benchmark)} {esc(run.name)}</h1>",
                 _table("run", ["field", "value"], fields),
                 "<h2>Failures</h2>" + _table("failures", ["item", "message"], [[f.item, f.message] for f in failures])
                 if failures else "",
                 "<h2>Metrics (over the repetitions)</h2>",
                 _table("metrics", ["metric", "unit", "n", "mean", "median", "stddev", "min", "max"], rows),
                 "<h2>Environment</h2>",
                 _table("environment", ["fact", "value"], [[k, v] for k, v in sorted((run.environment or {}).items())]),
                 "</body></html>"]
        return "".join(parts)

    def report(self, query: dict[str, list[str]]) -> str:
        from perflab.analysis.views.page import Filters, build_page
        from perflab.report import html as report_html

        one = lambda k: (query.get(k) or [None])[0]  # noqa: E731
        f = Filters(operands=tuple(query.get("operand", [])), benchmark=one("benchmark"),
                                metrics=tuple(query.get("metric", [])), box=one("box"), tag=one("tag"),
                                cross_box=one("cross_box") in ("1", "true", "yes"), title="perflab lab report")
        with self._lock:
            return report_html.render(report_html.document(build_page(self.store, f)))


def make_server(dashboard: Dashboard, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: str, ctype: str = "text/html; charset=utf-8") -> None:
            data = body.encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass   # the client went away (a closed tab, `curl | head`)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urlparse(self.path)
            try:
                if url.path == "/":
                    self._send(200, dashboard.index())
                elif url.path == "/favicon.ico":
                    self._send(204, "", "image/x-icon")   # none: not a 404 in every browser's console
                elif url.path.startswith("/run/"):
                    self._send(200, dashboard.run_page(url.path.removeprefix("/run/")))
                elif url.path == "/report":
                    self._send(200, dashboard.report(parse_qs(url.query)))
                else:
                    self._send(404, "<p>not found: try <a href='/'>/</a></p>")
            except PerflabError as e:
                self._send(400, f"<p class='failed'>{html.escape(str(e))}</p>")

        def _refuse(self) -> None:
            self._send(405, "read-only: GET only")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

        def log_message(self, fmt, *args) -> None:  # quiet: one line per request is noise here
            pass

    try:
        return ThreadingHTTPServer((host, port), Handler)
    except OSError as e:
        raise PerflabError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
