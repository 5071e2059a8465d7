""".NET timespans as VirtualClient's profiles write them (``00:10:00``, ``1.02:00:00``)."""

from __future__ import annotations

import re

_TIMESPAN = re.compile(r"^(?:(\d{1,8})\.)?(\d{1,2}):(\d{2}):(\d{2}(?:\.\d{1,7})?)$", re.ASCII)


#: .NET's TimeSpan.MaxValue is 10675199.02:48:05: no VirtualClient profile can say more.
MAX_TIMESPAN_DAYS = 10_675_199


def parse_timespan(text: str) -> float:
    """Seconds in a .NET timespan as VirtualClient writes them: ``hh:mm:ss``, ``d.hh:mm:ss``, with
    optional fractions of a second (``00:00:01.5``). ValueError names the expected form."""
    match = _TIMESPAN.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a timespan; write hh:mm:ss or d.hh:mm:ss, e.g. 00:10:00")
    days, hours, minutes, seconds = match.groups()
    if int(minutes) >= 60 or float(seconds) >= 60:
        raise ValueError(f"{text!r} is not a timespan: minutes and seconds go up to 59")
    if int(hours) >= 24 and days:
        raise ValueError(f"{text!r} is not a timespan: with days, hours go up to 23")
    if int(days or 0) > MAX_TIMESPAN_DAYS:
        raise ValueError(f"{text!r} is out of range: a timespan goes up to {MAX_TIMESPAN_DAYS} days")
    return int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def format_timespan(seconds: float) -> str:
    """``hh:mm:ss`` (``d.hh:mm:ss`` past a day, ``.fff`` for a fraction): the inverse of :func:`parse_timespan`."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    fraction = f"{seconds - whole:.3f}".rstrip("0").rstrip(".")[1:]  # "0.5" -> ".5", "0.000" -> ""
    return f"{days}.{text}{fraction}" if days else text + fraction
