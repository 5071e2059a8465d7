"""Facts: typed, read-only queries of a host (an argv plus a parser), re-read before every step.

No fact is cached across steps: installers change the host, so what was true at plan time of an
earlier step is not evidence for a later one. Each parser is a pure function tested on recorded
real outputs (tests/fixtures/facts/).
"""
