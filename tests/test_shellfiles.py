"""Files copied through a command's output (Slurm nodes, containers): a copy cut short is never taken as whole.

A real local shell runs every line (base64, the end mark, ``cat`` and ``mv``). What a real step cannot lose on
demand, the end of its output on the way back, is cut here by the host's ``_execute``: the loss seen once in the
suite beside a busy core, when a node's ``mlperf_log_detail.txt`` came back 26,880 bytes long, ending inside a line
(its base64 ended on a 4-character boundary, so it decoded without a word).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from workload.hosts.base import FileTransferError, OutputCollector
from workload.hosts.local import LocalHost
from workload.hosts.shellfiles import END_MARK, BytesCollector, FilesThroughCommands


class CutCopies(FilesThroughCommands):
    """File primitives over a real local shell; the first ``cut`` copies out lose their last 12 bytes of base64."""

    def __init__(self, cut: int) -> None:
        self.name = "node7"
        self.local = LocalHost()
        self.cut = cut
        self.copies = 0

    def _execute(
        self,
        shell_line: str,
        *,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        held = BytesCollector(1 << 30)
        code, timed_out = self.local._execute(shell_line, stdin=stdin, timeout=timeout, stdout=held, stderr=stderr)
        data = held.data()
        if "base64" in shell_line:
            self.copies += 1
            if self.copies <= self.cut:
                data = data[: -(len(END_MARK) + 12)]  # 12: a 4-character boundary, so the rest still decodes
        stdout.feed(data)
        return code, timed_out


@pytest.fixture
def detail_log(tmp_path: Path) -> Path:
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_bytes(b"".join(b':::MLLOG {"key": "result_%d", "value": %d}\n' % (i, i * 7919) for i in range(400)))
    return path


def test_a_whole_copy_is_the_file_byte_for_byte(detail_log: Path) -> None:
    host = CutCopies(cut=0)
    assert host.read_bytes(str(detail_log)) == detail_log.read_bytes()
    assert host.copies == 1


def test_a_copy_cut_short_once_is_made_again(detail_log: Path, caplog: pytest.LogCaptureFixture) -> None:
    host = CutCopies(cut=1)
    with caplog.at_level(logging.WARNING):
        assert host.read_bytes(str(detail_log)) == detail_log.read_bytes()
    assert host.copies == 2
    assert "the copy was cut short" in caplog.text and "copying it again" in caplog.text


def test_a_copy_cut_short_every_time_is_an_error_naming_the_file(detail_log: Path) -> None:
    host = CutCopies(cut=2)
    with pytest.raises(FileTransferError, match=r"mlperf_log_detail\.txt: the copy was cut short") as info:
        host.read_bytes(str(detail_log))
    assert info.value.host == "node7" and host.copies == 2


def test_a_file_that_ends_with_the_marks_text_is_copied_whole(tmp_path: Path) -> None:
    # The mark follows the base64 text, which never holds a space: a file's own bytes cannot forge it.
    path = tmp_path / "tricky"
    path.write_bytes(b"data" + END_MARK)
    assert CutCopies(cut=0).read_bytes(str(path)) == b"data" + END_MARK


def test_a_missing_file_is_still_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        CutCopies(cut=0).read_bytes(str(tmp_path / "absent"))


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    host = CutCopies(cut=0)
    with pytest.raises(FileTransferError):
        host.read_bytes(str(fifo))
