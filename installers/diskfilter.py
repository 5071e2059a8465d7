"""The ``DiskFilter`` grammar, compatible with VirtualClient's, and disk selection.

Grammar: terms joined by ``&``, each ``Name`` or ``Name:value``, names case-insensitive::

    BiggestSize | SmallestSize                 keep the biggest / smallest of the disks left
    SizeGreaterThan:<size>                     size >= <size>   (">=" like VirtualClient)
    SizeLessThan:<size>                        size <= <size>
    SizeEqualTo:<size>                         within +-1 % of <size>
    DiskPath:/dev/sdc,/dev/sdd                 these disks (a partition path selects its disk)
    OSDisk:true|false                          the OS disk only / never (bare "OSDisk" = true)
    None                                       no filtering

``<size>`` is a number (decimals allowed) with an optional 1024-based unit ``b kb mb gb tb``
(``1000gb`` = 1000 GiB; no unit = bytes). Terms apply in the order written, like VirtualClient,
so ``SizeGreaterThan:1tb&BiggestSize`` is the biggest of the disks of at least 1 TiB.

Safety, stronger than VirtualClient: the OS disk is removed BEFORE any term applies unless the
filter says ``OSDisk:true`` and the caller is not formatting; formatting never selects it. Loop
devices are only candidates when ``DiskPath`` names them (tests use them; nothing else should).
Bad filters raise ``ValueError("DiskFilter: ...")`` naming the term and the problem.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from workload.facts.disks import Disk

Purpose = Literal["format", "mount"]

#: Canonical spellings, looked up by lower-case name.
TERMS = ("BiggestSize", "SmallestSize", "SizeGreaterThan", "SizeLessThan", "SizeEqualTo", "DiskPath", "OSDisk", "None")
_BY_LOWER = {t.lower(): t for t in TERMS}
_SIZE_TERMS = ("SizeGreaterThan", "SizeLessThan", "SizeEqualTo")
_VALUELESS = ("BiggestSize", "SmallestSize", "None")
_UNITS = {"": 1, "b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4}
_SIZE = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>[a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str, *, where: str = "size") -> int:
    """``"1000gb"`` -> bytes (1024-based). Raises ``ValueError("<where>: ...")`` on anything else."""
    match = _SIZE.match(text)
    unit = match["unit"].lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"{where}: {text.strip()!r} is not a size (write a number with an optional unit b, kb, mb, gb or tb, "
            "1024-based, e.g. 1000gb or 1.5tb)"
        )
    return int(float(match["num"]) * _UNITS[unit])


@dataclass(frozen=True)
class Term:
    """One parsed term: its canonical name and value."""

    name: str
    text: str
    size: int = 0
    paths: tuple[str, ...] = ()
    flag: bool = False


@dataclass(frozen=True)
class DiskFilter:
    """A parsed DiskFilter; :meth:`parse` builds it, :meth:`select` applies it."""

    text: str
    terms: tuple[Term, ...]

    # -- parsing ---------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str | None) -> DiskFilter:
        """Parse a filter; an empty one keeps every non-OS disk (like VirtualClient's no-op)."""
        raw = (text or "").strip()
        terms: list[Term] = []
        for piece in raw.split("&"):
            piece = piece.strip()
            if not piece:
                continue
            terms.append(_parse_term(piece))
        _check_conflicts(raw, terms)
        return cls(text=raw, terms=tuple(terms))

    # -- queries ---------------------------------------------------------------------------------
    @property
    def os_disk(self) -> bool | None:
        """The OSDisk term's value, or None when the filter does not say."""
        for term in self.terms:
            if term.name == "OSDisk":
                return term.flag
        return None

    @property
    def disk_paths(self) -> tuple[str, ...]:
        return tuple(p for t in self.terms if t.name == "DiskPath" for p in t.paths)

    def __str__(self) -> str:
        return self.text or "(empty: every non-OS disk)"

    # -- selection -------------------------------------------------------------------------------
    def select(self, disks: Sequence[Disk], *, purpose: Purpose) -> list[Disk]:
        """The disks this filter picks, in the given order. Never the OS disk when formatting."""
        if self.os_disk is True and purpose == "format":
            return []  # the filter asks for the OS disk only, and formatting never selects it
        named = self.disk_paths
        left = [d for d in disks if d.size > 0 and (not d.is_loop or _named(d, named))]
        wants_os = self.os_disk is True and purpose != "format"
        # The OS-disk cut comes first (VirtualClient applies it in written order, which lets
        # "BiggestSize&OSDisk:false" come out empty when the OS disk is the biggest).
        left = [d for d in left if d.is_os_disk] if wants_os else [d for d in left if not d.is_os_disk]
        for term in self.terms:
            left = _apply(term, left)
        if purpose == "format":
            left = [d for d in left if not d.is_os_disk]  # belt and braces: no term can add disks back
        return left


def _parse_term(piece: str) -> Term:
    name_text, sep, value = piece.partition(":")
    name = _BY_LOWER.get(name_text.strip().lower())
    value = value.strip()
    if name is None:
        raise ValueError(f"DiskFilter: unknown term {name_text.strip()!r} (known terms: {', '.join(TERMS)})")
    if name in _VALUELESS:
        if sep and value:
            raise ValueError(f"DiskFilter: {name} takes no value, got {piece!r}")
        return Term(name=name, text=piece)
    if name in _SIZE_TERMS:
        if not value:
            raise ValueError(f"DiskFilter: {name} needs a size, e.g. {name}:1000gb")
        return Term(name=name, text=piece, size=parse_size(value, where=f"DiskFilter: {name}"))
    if name == "OSDisk":
        lowered = value.lower()
        if lowered not in ("", "true", "false"):
            raise ValueError(f"DiskFilter: OSDisk takes true or false, got {value!r}")
        return Term(name=name, text=piece, flag=lowered != "false")
    paths = tuple(p.strip() for p in value.split(",") if p.strip())
    if not paths:
        raise ValueError("DiskFilter: DiskPath needs one or more device paths, e.g. DiskPath:/dev/sdc,/dev/sdd")
    for path in paths:
        if not path.startswith("/dev/") or any(c.isspace() for c in path):
            raise ValueError(f"DiskFilter: DiskPath {path!r} is not a device path (write /dev/<name>)")
    return Term(name=name, text=piece, paths=paths)


def _check_conflicts(raw: str, terms: list[Term]) -> None:
    seen: dict[str, Term] = {}
    for term in terms:
        if term.name in seen and term.name != "DiskPath":
            raise ValueError(f"DiskFilter: {term.name} is given twice in {raw!r}")
        seen[term.name] = term
    if "None" in seen and len(terms) > 1:
        raise ValueError(f"DiskFilter: None means 'no filtering' and cannot be combined with other terms in {raw!r}")
    if "BiggestSize" in seen and "SmallestSize" in seen:
        raise ValueError("DiskFilter: BiggestSize and SmallestSize conflict; use one of them")
    low = seen["SizeGreaterThan"].size if "SizeGreaterThan" in seen else 0
    high = seen["SizeLessThan"].size if "SizeLessThan" in seen else None
    if high is not None and low > high:
        raise ValueError(
            f"DiskFilter: {seen['SizeGreaterThan'].text} and {seen['SizeLessThan'].text} conflict: no size is both"
        )
    if "SizeEqualTo" in seen:
        equal = seen["SizeEqualTo"].size
        if equal * 1.01 < low or (high is not None and equal * 0.99 > high):
            raise ValueError(f"DiskFilter: {seen['SizeEqualTo'].text} conflicts with the other size terms")


def _named(disk: Disk, paths: Sequence[str]) -> bool:
    """Whether a DiskPath entry names this disk, one of its partitions/holders, or a mount point on it."""
    names = {disk.path, disk.name, *disk.node_paths(), *disk.mountpoints()}
    return any(p in names for p in paths)


def _apply(term: Term, disks: list[Disk]) -> list[Disk]:
    if term.name == "BiggestSize":
        biggest = max((d.size for d in disks), default=0)
        return [d for d in disks if d.size == biggest]
    if term.name == "SmallestSize":
        smallest = min((d.size for d in disks), default=0)
        return [d for d in disks if d.size == smallest]
    if term.name == "SizeGreaterThan":
        return [d for d in disks if d.size >= term.size]
    if term.name == "SizeLessThan":
        return [d for d in disks if d.size <= term.size]
    if term.name == "SizeEqualTo":
        return [d for d in disks if term.size * 0.99 <= d.size <= term.size * 1.01]
    if term.name == "DiskPath":
        return [d for d in disks if _named(d, term.paths)]
    return disks  # OSDisk (applied first) and None
