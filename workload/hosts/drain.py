"""When a command's output counts as complete after the command itself has exited (every transport).

The exit status can come before the last of the output: sshd sends a command's status as soon as the
command exits and forwards what is still in its pipe afterwards (a loaded login node or a slow link
can take seconds over it), and a background child (``daemon &``) may hold the pipes open for good.
Cutting the output a fixed time after the exit lost the end of a result file copied back from a
Slurm node beside a busy core. So output is read for as long as it keeps coming: the drain ends at
end of file, or once nothing has arrived for :data:`DRAIN_QUIET_S` (a child holding the pipes
mostly writes nothing), and at the latest :data:`DRAIN_CAP_S` after the exit (a child that never
stops writing must not hold the step forever).
"""

from __future__ import annotations

#: After the exit: the drain ends once no output has arrived for this long.
DRAIN_QUIET_S = 2.0
#: After the exit: the drain ends this long after it at the latest, output or not.
DRAIN_CAP_S = 30.0


class DrainClock:
    """The drain of one command: tell it when the command exited and when output arrived; ask :meth:`over`."""

    def __init__(self) -> None:
        self.exited_at: float | None = None
        self._last_output: float | None = None

    def exited(self, now: float) -> None:
        """The exit status arrived (the first call counts)."""
        if self.exited_at is None:
            self.exited_at = now

    def output(self, now: float) -> None:
        """Output arrived."""
        self._last_output = now

    def over(self, now: float) -> bool:
        """Whether to stop reading: the command has exited, and output has been quiet or the cap is reached."""
        if self.exited_at is None:
            return False
        quiet_since = max(self.exited_at, self._last_output or self.exited_at)
        return now - quiet_since > DRAIN_QUIET_S or now - self.exited_at > DRAIN_CAP_S
