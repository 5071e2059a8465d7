"""Large-file downloads planned as commands on the host: resumable, retried, checksummed.

The file is fetched to ``<dest>.part`` with ``curl -C -`` (or ``wget -c``), so a transfer cut in
the middle continues from where it stopped, on the next attempt or the next run. It is checked
against its SHA-256 (when one is given) and only then renamed to ``dest``: a file at ``dest`` is
therefore always complete and verified, and its presence is the "already downloaded" fact.
A checksum mismatch deletes the partial file (resuming a corrupt file would never succeed).
Positional arguments (the URL, paths) follow ``--``, so none is ever read as an option.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from workload.commands import Command, cmd
from workload.facts.fact import Fact
from workload.hosts.base import Host
from workload.installers.apt import with_retry

Tool = Literal["curl", "wget"]
DOWNLOAD_TIMEOUT_S = 4 * 3600.0
SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")

VERIFY_SCRIPT = r"""
if printf '%s  %s\n' "$1" "$2" | sha256sum -c --status -; then
  echo "sha256 OK: $2"
else
  echo "sha256 mismatch for $2 (expected $1, got $(sha256sum "$2" | cut -d' ' -f1)); removed it" >&2
  rm -f "$2"
  exit 1
fi
"""


def file_name(url: str) -> str:
    """The file name a URL points at (``.../cuda_12.4.0_550.54.14_linux.run`` -> that name)."""
    name = posixpath.basename(unquote(urlsplit(url).path))
    if not name or name in (".", ".."):
        raise ValueError(f"cannot tell a file name from the URL {url!r}")
    return name


@dataclass(frozen=True)
class DownloadState:
    """Facts about one download target on the host."""

    complete: bool  # dest exists (it was verified before it was renamed into place)
    partial_bytes: int  # size of dest.part, 0 if none
    tool: Tool | None  # the download tool the host has (curl preferred)


def download_state_query(dest: str) -> Command:
    script = (
        'if [ -e "$1" ]; then echo complete; fi; '
        'if [ -e "$1.part" ]; then echo "partial $(stat -c %s "$1.part")"; fi; '
        "if command -v curl >/dev/null 2>&1; then echo tool curl; "
        "elif command -v wget >/dev/null 2>&1; then echo tool wget; fi"
    )
    return cmd("sh", "-c", script, "download-state", dest, timeout=60, readonly=True)


def read_download_state(host: Host, dest: str) -> DownloadState:
    return parse_download_state(host.run(download_state_query(dest)).stdout)


def parse_download_state(text: str) -> DownloadState:
    complete, partial = False, 0
    tool: Tool | None = None
    for line in text.splitlines():
        words = line.split()
        if words == ["complete"]:
            complete = True
        elif len(words) == 2 and words[0] == "partial" and words[1].isdigit():
            partial = int(words[1])
        elif len(words) == 2 and words[0] == "tool" and words[1] in ("curl", "wget"):
            tool = "curl" if words[1] == "curl" else "wget"  # spelled out for the Literal type
    return DownloadState(complete=complete, partial_bytes=partial, tool=tool)


def fetch_command(url: str, part: str, tool: Tool, *, attempts: int = 5) -> Command:
    """One resumable fetch of ``url`` into ``part``, retried with backoff around the tool's own retries."""
    if tool == "curl":
        base = cmd(
            "curl", "-fL", "-C", "-", "--retry", "3", "--retry-delay", "2", "--connect-timeout", "30",
            "--speed-limit", "1024", "--speed-time", "60", "-sS", "-o", part, "--", url,
            sudo=True, timeout=DOWNLOAD_TIMEOUT_S,
        )  # fmt: skip
    else:
        base = cmd(
            "wget", "-c", "--tries=3", "--waitretry=2", "--timeout=60", "-nv", "-O", part, "--", url,
            sudo=True, timeout=DOWNLOAD_TIMEOUT_S,
        )  # fmt: skip
    return with_retry(base, attempts=attempts, delay_s=3)


def download_commands(url: str, dest: str, *, sha256: str | None, tool: Tool, attempts: int = 5) -> tuple[Command, ...]:
    """Commands that leave a complete (and, with ``sha256``, verified) copy of ``url`` at ``dest``."""
    if sha256 is not None and not SHA256_RE.match(sha256):
        raise ValueError(f"not a SHA-256 hex digest: {sha256!r}")
    part = dest + ".part"
    commands: list[Command] = [
        cmd("mkdir", "-p", "--", posixpath.dirname(dest) or "/", sudo=True, timeout=60),
        fetch_command(url, part, tool, attempts=attempts),
    ]
    if sha256 is not None:
        commands.append(cmd("sh", "-c", VERIFY_SCRIPT, "verify-sha256", sha256.lower(), part, sudo=True, timeout=1800))
    commands.append(cmd("mv", "-f", "--", part, dest, sudo=True, timeout=60))
    return tuple(commands)


def download_state(dest: str) -> Fact[DownloadState]:
    """Whether ``dest`` was downloaded, how much of it was, and with what tool (:func:`read_download_state`)."""
    return Fact(f"download-state({dest})", lambda host: read_download_state(host, dest), (download_state_query(dest),))
