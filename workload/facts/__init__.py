"""Facts: typed, read-only queries of a host (an argv plus a parser), never older than the last change.

Installers change the host, so what was true before a change is not evidence after it: every
command that is not a read, every file write, a reboot and a wait for another process's apt lock
make the host forget what it read (``Host.remembering_facts``); a fact read twice with nothing
changed in between is read once. So each step plans from facts read after the previous step's
last change. Each parser is a pure function tested on recorded real outputs (tests/fixtures/facts/).

Each fact is declared once, next to its parser, as a :class:`~workload.facts.fact.Fact` (name,
read-only queries, reader): steps, the MLPerf action and ``workload doctor`` name the facts they
read, and prefetching and memoising derive from those declarations (see ``fact.py``).
"""
