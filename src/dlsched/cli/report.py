"""``dlsched report RUN_DIR``: the dashboard of a finished simulation, written as one HTML file or served.

The page is the one ``dlsched serve`` shows at ``/`` (:mod:`dlsched.dashboard`), with the run's data in it:
the cluster and queue at one moment, the allocation timeline, usage, and a page per job with its
explanations. The file needs no server and no network; ``--serve`` also serves it on a local port.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import app, guard, note
from dlsched.core import InputError

#: ``--figures`` of ``simulate`` and ``compare``: the report's figures as files too.
FiguresOpt = Annotated[str | None, typer.Option(
    "--figures", metavar="FORMATS", help="Also write each figure of report.html as figure-<section>.<format> "
    "in --out: a comma-separated list of svg, pdf, png.")]


def figure_formats(figures: str | None, out_dir: str | None) -> tuple[str, ...]:
    """The formats ``--figures`` names, checked before any simulation; it needs ``--out``."""
    from dlsched.sim.report_figures import parse_figure_formats

    formats = parse_figure_formats(figures)
    if formats and out_dir is None:
        raise InputError("--figures writes into the --out folder; give --out DIR as well", field="--figures")
    return formats


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A folder written by 'dlsched simulate --out'.")],
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the page here (default: "
                                                  "RUN_DIR/dashboard.html).")] = None,
    at_s: Annotated[float | None, typer.Option("--at", help="Show the cluster and the queue at this simulated "
                                               "time in seconds (default: the round with the longest queue).")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Also serve the page on http://HOST:PORT/ until "
                                        "Ctrl-C.")] = False,
    host: Annotated[str, typer.Option("--host", help="Address to serve on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to serve on (0: any free one).", min=0,
                                      max=65535)] = 8050,
) -> None:
    """Write (or serve) the dashboard of a finished simulation; prints the page's path."""

    def go() -> None:
        from dlsched.dashboard import page_html
        from dlsched.dashboard.simulation import load_run
        from dlsched.outputs import atomic_file

        if at_s is not None and at_s < 0:
            raise InputError(f"must be a time >= 0, got {at_s}", field="--at")
        html = page_html(load_run(run_dir, at_s))
        target = out_file if out_file is not None else run_dir / "dashboard.html"
        with atomic_file(target) as tmp:
            tmp.write_text(html, encoding="utf-8")
        typer.echo(str(target))
        if serve:
            _serve(html, host, port)

    guard(go)


def _serve(html: str, host: str, port: int) -> None:
    """Serve ``html`` at ``/`` until interrupted."""
    body = html.encode("utf-8")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            if self.path.split("?")[0] not in ("/", "/index.html"):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
            return

    try:
        server = http.server.ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}", field="port") from None
    note(f"serving on http://{host}:{server.server_address[1]}/ (Ctrl-C stops)")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        thread.join()
    finally:
        server.shutdown()
