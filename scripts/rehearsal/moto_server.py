"""moto's server on 127.0.0.1, handing moto one request at a time: for the rehearsal's jobs and planner, and for the
tests' loopback DynamoDB (tests/pipeline/manifest_server.py).

moto's backends are not thread-safe (a DynamoDB Query iterating a table while a PutItem adds to it raised
"dictionary changed size during iteration" and answered 500), and Spark tasks call the manifest from many threads.
"""

from __future__ import annotations

import socketserver
import threading
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment


def serialized(app: WSGIApplication) -> WSGIApplication:
    """`app` handling one request at a time: its body is produced under the lock too."""
    lock = threading.Lock()

    def handle(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """`app`'s answer, its whole body read (and the body closed) while holding the lock; raises what `app` does."""
        with lock:
            body = app(environ, start_response)
            try:
                return list(body)
            finally:
                if hasattr(body, "close"):
                    body.close()

    return handle


class _QuietRequestHandler(MotoRequestHandler):
    """moto's request handler, without werkzeug's line per request on this process's stderr."""

    def log_request(self, *args: Any) -> None:
        """Log nothing."""


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's server (as `moto.server.ThreadedMotoServer` serves it, a thread per request, but one request at a
    time in moto) on a free port of 127.0.0.1; yields its URL, and stops it on exit.

    Raises:
        OSError: no port could be bound on 127.0.0.1.
    """
    app = serialized(DomainDispatcherApplication(create_backend_app))
    with serving(make_server("127.0.0.1", 0, app, threaded=True, request_handler=_QuietRequestHandler)) as url:
        yield url


@contextmanager
def serving(server: socketserver.TCPServer) -> Iterator[str]:
    """`server` (bound on 127.0.0.1) serving on a thread of its own; yields its URL, then shuts it down, closes it
    and waits for the thread."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def reset(url: str) -> None:
    """Forget every resource of the moto server at `url` (moto's `/moto-api/reset`): its backends live in the
    process, so a second server started in it would hold the first one's resources too.

    Raises:
        OSError: the server did not answer.
    """
    with urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=30):
        pass
