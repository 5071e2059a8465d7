"""The test bed's ``docker exec`` (tests/testbed/dockerexec.py): output the engine loses is read back, never re-run.

A real fresh VM runs every command. The loss itself (moby/moby#27289: no output for a process that ran and wrote,
exit status 0) cannot be produced on demand, so :class:`LosesOutput` drops what the engine handed back for the
first execs, as the engine does, fails the first archive reads as a missing file would, and passes everything
else through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import docker.errors
import pytest
from docker.models.containers import Container, ExecResult

from tests.testbed.dockerexec import exec_output
from tests.testbed.freshvm import FreshVM
from tests.testbed.state import TestbedError

pytestmark = pytest.mark.slow


class LosesOutput:
    """A real container whose first ``lost`` execs come back with no output (their exit status kept) and whose first
    ``lost_reads`` archive reads fail."""

    def __init__(self, container: Container, lost: int, lost_reads: int = 0) -> None:
        self.container = container
        self.name = container.name
        self.lost, self.lost_reads = lost, lost_reads
        self.execs: list[list[str]] = []
        self.reads: list[str] = []

    def exec_run(self, cmd: list[str], **kwargs: Any) -> ExecResult:
        self.execs.append(cmd)
        result = self.container.exec_run(cmd, **kwargs)
        if len(self.execs) <= self.lost:
            return ExecResult(result.exit_code, b"")
        return result

    def get_archive(self, path: str, **kwargs: Any) -> Any:
        self.reads.append(path)
        if len(self.reads) <= self.lost_reads:
            raise docker.errors.NotFound(f"Could not find the file {path} in container {self.name}")
        return self.container.get_archive(path, **kwargs)


COUNTED = ["sh", "-c", "echo run >> /root/runs; id -u hpc; echo to-stderr >&2; exit 3"]


def test_output_lost_on_the_way_is_read_back_and_the_command_ran_once(fresh_vm: Callable[..., FreshVM]) -> None:
    vm = fresh_vm(user="hpc")
    assert vm.container is not None
    box = LosesOutput(vm.container, lost=1, lost_reads=1)
    code, out = exec_output(box, COUNTED)
    assert (code, out) == (3, "1000\nto-stderr\n")
    # One exec only: the output file was read back through the archive API, the second read after a failed first.
    assert len(box.execs) == 1 and len(box.reads) == 2 and box.reads[0].startswith("/tmp/testbed-exec-")
    assert vm.check(["cat", "/root/runs"]) == "run\n"


def test_output_that_never_arrives_is_an_error_not_an_empty_string(fresh_vm: Callable[..., FreshVM]) -> None:
    vm = fresh_vm()
    assert vm.container is not None
    box = LosesOutput(vm.container, lost=100, lost_reads=100)
    with pytest.raises(TestbedError, match=r"the output of sh -c .* never arrived whole") as info:
        exec_output(box, COUNTED)
    # What arrived each way is named; the command ran once.
    assert "the exec returned 0 bytes ending b''" in str(info.value)
    assert "read 5 times through the archive API, holds 0 bytes" in str(info.value)
    assert len(box.execs) == 1 and len(box.reads) == 5
    assert vm.check(["cat", "/root/runs"]) == "run\n"


def test_a_plain_exec_keeps_status_output_user_and_environment(fresh_vm: Callable[..., FreshVM]) -> None:
    vm = fresh_vm(user="hpc")
    assert vm.exec(["sh", "-c", 'printf "%s:%s" "$(id -un)" "$GREETING"'], user="hpc", env={"GREETING": "hi"}) == (
        0,
        "hpc:hi",
    )
    assert vm.exec(["false"]) == (1, "")
    assert vm.exec(["printf", "no newline \x1e at the end"]) == (0, "no newline \x1e at the end")
    # The command is not on the wrapper's command line: pgrep -f finds no process of the exec itself.
    assert vm.exec(["pgrep", "-f", "no-such-process-f00d"]) == (1, "")
