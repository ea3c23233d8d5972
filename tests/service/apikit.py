"""A live API server for tests: the service's FastAPI app under a real uvicorn on a loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class LiveServer:
    """A uvicorn server running the API in a thread, on a loopback port bound before it starts."""

    def __init__(self, app: object) -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off")  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the API server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@contextmanager
def live_api(store: object, jobs_dir: Path, cluster_info: object = None) -> Iterator[LiveServer]:
    from dlsched.service.api import create_app

    app = create_app(store, jobs_dir=jobs_dir, cluster_info=cluster_info)  # type: ignore[arg-type]
    with LiveServer(app) as server:
        yield server
