"""Offline fixtures for fetching: a real HTTP server on 127.0.0.1 serving a folder laid out like upstream
(``OWNER/REPO/COMMIT/PATH``), and the tiny manifest of ``fetchkit`` written to a file."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fetchkit import tiny_manifest


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # keep pytest's output clean
        pass


@pytest.fixture
def serve():
    """Start a static HTTP server on a folder; yields a function (folder -> base URL). Stopped afterwards."""
    servers: list[ThreadingHTTPServer] = []

    def start(folder: Path) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(mirror folder, manifest file) of the tiny dataset."""
    mirror = tmp_path / "mirror"
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(tiny_manifest(mirror)))
    yield mirror, path
