"""A download server on 127.0.0.1 serving the stand-in CUDA ``.run`` installer.

``http.server`` in a thread, with what download code must cope with: ``Range`` requests (206 with
``Content-Range``, 416 past the end), ``HEAD``, ``ETag``/``Last-Modified``, and on demand one
connection cut in the middle of the body (:meth:`FileServer.cut_next_download`) to test resume.
The runfile is a real shell script (makeself-like, checks its own payload) with a few MB of
deterministic payload, so its sha256 is stable and cached across sessions.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import random
import re
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.testbed.state import STANDINS_DIR, file_lock, state_dir

CUDA_VERSION = "12.4"
CUDA_FULL_VERSION = "12.4.0"
CUDA_RUNFILE_DRIVER = "550.54.14"
RUNFILE_NAME = f"cuda_{CUDA_FULL_VERSION}_{CUDA_RUNFILE_DRIVER}_linux.run"
RUNFILE_URL_PATH = f"/compute/cuda/{CUDA_FULL_VERSION}/local_installers/{RUNFILE_NAME}"
PAYLOAD_BYTES = 4 * 1024 * 1024


def build_runfile() -> Path:
    """Return the cached stand-in CUDA runfile, building it once (deterministic bytes)."""
    head = (STANDINS_DIR / "cuda-runfile-head.sh").read_text()
    key = hashlib.sha256(head.encode() + str(PAYLOAD_BYTES).encode()).hexdigest()[:12]
    out = state_dir() / "cache" / f"{key}-{RUNFILE_NAME}"
    with file_lock("runfile"):
        if out.exists():
            return out
        payload = random.Random(RUNFILE_NAME).randbytes(PAYLOAD_BYTES)
        text = (
            head.replace("@CUDA_FULL@", CUDA_FULL_VERSION)
            .replace("@CUDA@", CUDA_VERSION)
            .replace("@DRIVER@", CUDA_RUNFILE_DRIVER)
            .replace("@PAYLOAD_SHA256@", hashlib.sha256(payload).hexdigest())
        )
        # The offset names itself, so it has a fixed width (8 digits); the head ends in "exit 0".
        offset = len(text.replace("@PAYLOAD_OFFSET@", "0" * 8).encode()) + 1
        text = text.replace("@PAYLOAD_OFFSET@", f"{offset:08d}")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".partial")
        tmp.write_bytes(text.encode() + payload)
        tmp.chmod(0o755)
        tmp.rename(out)
    return out


@dataclass(frozen=True)
class RequestRecord:
    """One request the server answered (for assertions about resume behaviour)."""

    method: str
    path: str
    range: str | None
    status: int


class FileServer:
    """Serve files at fixed URL paths on 127.0.0.1. Start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(self) -> None:
        self.files: dict[str, Path] = {}
        self.requests: list[RequestRecord] = []
        self._cut_at: int | None = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, url_path: str) -> str:
        return self.base_url + url_path

    def add(self, url_path: str, path: Path) -> str:
        """Serve ``path`` at ``url_path``; return the full URL."""
        self.files[url_path] = path
        return self.url_for(url_path)

    def cut_next_download(self, at_bytes: int) -> None:
        """Make the next GET send only ``at_bytes`` of its body, then drop the connection."""
        with self._lock:
            self._cut_at = at_bytes

    def _take_cut(self) -> int | None:
        with self._lock:
            cut, self._cut_at = self._cut_at, None
            return cut

    def start(self) -> FileServer:
        server_self = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet: the request log is server_self.requests

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _record(self, status: int) -> None:
                server_self.requests.append(RequestRecord(self.command, self.path, self.headers.get("Range"), status))

            def _serve(self, body: bool) -> None:
                path = server_self.files.get(self.path.split("?", 1)[0])
                if path is None:
                    self._record(404)
                    self.send_error(404, "Not Found")
                    return
                size = path.stat().st_size
                start, end, status = 0, size - 1, 200
                header = self.headers.get("Range")
                if header:
                    m = re.fullmatch(r"bytes=(\d*)-(\d*)", header.strip())
                    if m and (m.group(1) or m.group(2)):
                        if m.group(1):
                            start = int(m.group(1))
                            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                        else:
                            start = max(size - int(m.group(2)), 0)
                        if start >= size or start > end:
                            self._record(416)
                            self.send_response(416)
                            self.send_header("Content-Range", f"bytes */{size}")
                            self.send_header("Content-Length", "0")
                            self.end_headers()
                            return
                        status = 206
                self._record(status)
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(end - start + 1))
                self.send_header("ETag", f'"{size:x}-{int(path.stat().st_mtime):x}"')
                self.send_header("Last-Modified", email.utils.formatdate(path.stat().st_mtime, usegmt=True))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.end_headers()
                if not body:
                    return
                cut = server_self._take_cut()
                remaining = end - start + 1
                sent = 0
                with open(path, "rb") as f:
                    f.seek(start)
                    while remaining > 0:
                        chunk = f.read(min(65536, remaining))
                        if cut is not None and sent + len(chunk) >= cut:
                            self.wfile.write(chunk[: max(cut - sent, 0)])
                            self.wfile.flush()
                            # Drop the connection mid-body, as a flaky network does.
                            with contextlib.suppress(OSError):
                                self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            return
                        self.wfile.write(chunk)
                        sent += len(chunk)
                        remaining -= len(chunk)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="testbed-fileserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@dataclass
class CudaRunfileServer:
    """The file server plus the stand-in CUDA runfile on it (what the ``cuda_runfile_server`` fixture yields)."""

    server: FileServer
    path: Path
    url: str
    sha256: str
    size: int

    def cut_next_download(self, at_bytes: int) -> None:
        self.server.cut_next_download(at_bytes)

    @property
    def requests(self) -> list[RequestRecord]:
        return self.server.requests


def start_cuda_runfile_server() -> CudaRunfileServer:
    """Build (cached) the runfile, serve it at NVIDIA's URL path on a fresh port."""
    path = build_runfile()
    server = FileServer().start()
    url = server.add(RUNFILE_URL_PATH, path)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return CudaRunfileServer(server=server, path=path, url=url, sha256=sha, size=path.stat().st_size)
