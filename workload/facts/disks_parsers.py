"""Disk facts, the parsers: ``lsblk``, ``blkid``/``wipefs``, ``findmnt``, ``/proc/swaps``, ``/etc/fstab``.

Moved out of :mod:`workload.facts.disks` (which re-exports every name and says why each source is
needed): each parser is a pure function of a command's output, tested on recorded outputs.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from workload.errors import FactError


# -- lsblk -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BlockDevice:
    """One node of the lsblk tree."""

    name: str
    path: str
    size: int
    type: str
    fstype: str | None = None
    uuid: str | None = None
    label: str | None = None
    mountpoints: tuple[str, ...] = ()
    pkname: str | None = None
    rotational: bool | None = None
    transport: str | None = None
    model: str | None = None
    read_only: bool = False
    children: tuple[BlockDevice, ...] = ()

    def walk(self) -> Iterator[BlockDevice]:
        """This node, then every node below it (depth first)."""
        yield self
        for child in self.children:
            yield from child.walk()

    def describe(self) -> str:
        """Short words for messages: ``loop3p1 (ext4, mounted at /mnt/x)``."""
        bits = [self.fstype] if self.fstype else []
        if self.type not in ("part", "disk", "loop"):
            bits.append(self.type)
        if self.mountpoints:
            bits.append("mounted at " + ", ".join(self.mountpoints))
        return f"{self.name} ({', '.join(bits)})" if bits else self.name


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _flag(value: Any) -> bool | None:
    # lsblk < 2.33 prints booleans as "0"/"1" strings; newer ones as JSON booleans.
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    return str(value).strip() in ("1", "true")


def _device(raw: Mapping[str, Any], where: str) -> BlockDevice:
    if not isinstance(raw, Mapping):
        raise FactError(f"lsblk: {where} is not an object")
    name = _text(raw.get("name"))
    if name is None:
        raise FactError(f"lsblk: {where} has no name")
    try:
        size = int(raw.get("size") or 0)
    except (TypeError, ValueError):
        raise FactError(
            f"lsblk: {where} ({name}) has a size that is not a number of bytes: {raw.get('size')!r}"
        ) from None
    points: list[str] = []
    # lsblk >= 2.37 has MOUNTPOINTS (a list, null for "none"); older ones MOUNTPOINT (one value).
    raw_points = raw.get("mountpoints", raw.get("mountpoint"))
    for point in raw_points if isinstance(raw_points, list) else [raw_points]:
        text = _text(point)
        if text is not None:
            points.append(text)
    children = raw.get("children") or []
    return BlockDevice(
        name=name,
        path=_text(raw.get("path")) or f"/dev/{name}",
        size=size,
        type=(_text(raw.get("type")) or "disk").lower(),
        fstype=_text(raw.get("fstype")),
        uuid=_text(raw.get("uuid")),
        label=_text(raw.get("label")),
        mountpoints=tuple(points),
        pkname=_text(raw.get("pkname")),
        rotational=_flag(raw.get("rota")),
        transport=_text(raw.get("tran")),
        model=_text(raw.get("model")),
        read_only=bool(_flag(raw.get("ro"))),
        children=tuple(_device(c, f"{where}.children[{i}]") for i, c in enumerate(children)),
    )


def parse_lsblk(text: str) -> tuple[BlockDevice, ...]:
    """Parse ``lsblk --json --bytes --output ...`` into its top-level devices (with children)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FactError(f"lsblk: output is not JSON ({exc})") from None
    devices = data.get("blockdevices") if isinstance(data, dict) else None
    if not isinstance(devices, list):
        raise FactError("lsblk: output has no 'blockdevices' list")
    return tuple(_device(d, f"blockdevices[{i}]") for i, d in enumerate(devices))


# -- blkid / wipefs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """What ``blkid -p`` found on one device node."""

    fstype: str | None = None
    uuid: str | None = None
    label: str | None = None
    #: Partition-table type (``gpt``, ``dos``) when the node holds a partition table.
    pttype: str | None = None
    usage: str | None = None


_BLKID_ERROR = re.compile(r"^blkid: error: (?P<dev>/\S+?): (?P<msg>.*)$")


def parse_blkid_export(stdout: str, stderr: str = "") -> tuple[dict[str, Probe], dict[str, str]]:
    """Parse ``blkid -p -o export DEV...``: (probes by device path, probe errors by device path).

    A device with no signature is simply absent from both maps (blkid prints nothing for it).
    """
    probes: dict[str, Probe] = {}
    for block in re.split(r"\n\s*\n", stdout.strip()):
        values: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = value.strip()
        dev = values.get("DEVNAME")
        if not dev:
            continue
        probes[dev] = Probe(
            fstype=values.get("TYPE") or None,
            uuid=values.get("UUID") or None,
            label=values.get("LABEL") or None,
            pttype=values.get("PTTYPE") or None,
            usage=values.get("USAGE") or None,
        )
    errors: dict[str, str] = {}
    for line in stderr.splitlines():
        match = _BLKID_ERROR.match(line.strip())
        if match:
            errors[match["dev"]] = match["msg"]
    return probes, errors


def parse_wipefs_json(text: str) -> tuple[str, ...]:
    """Signature types (``gpt``, ``PMBR``, ``ext4``...) from ``wipefs --no-act --json DEV``."""
    if not text.strip():
        return ()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FactError(f"wipefs: output is not JSON ({exc})") from None
    sigs = data.get("signatures") if isinstance(data, dict) else None
    if not isinstance(sigs, list):
        raise FactError("wipefs: output has no 'signatures' list")
    found: list[str] = []
    for sig in sigs:
        kind = _text(sig.get("type")) if isinstance(sig, dict) else None
        if kind and kind not in found:
            found.append(kind)
    return tuple(found)


# -- findmnt / swaps / fstab ------------------------------------------------------------------------
@dataclass(frozen=True)
class Mount:
    """One mounted filesystem from findmnt."""

    target: str
    source: str
    fstype: str
    size: int | None
    avail: int | None


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def parse_findmnt(text: str) -> tuple[Mount, ...]:
    """Parse ``findmnt --json --bytes --list -o TARGET,SOURCE,FSTYPE,SIZE,AVAIL`` (tree form accepted)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise FactError(f"findmnt: output is not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("filesystems"), list):
        raise FactError("findmnt: output has no 'filesystems' list")
    mounts: list[Mount] = []

    def add(items: list[Any]) -> None:
        for item in items:
            if not isinstance(item, dict) or not item.get("target"):
                continue
            # A bind mount's source reads "/dev/vda1[/var/lib/x]"; the device is the part before "[".
            source = str(item.get("source") or "").split("[", 1)[0]
            mounts.append(
                Mount(
                    target=str(item["target"]),
                    source=source,
                    fstype=str(item.get("fstype") or ""),
                    size=_int_or_none(item.get("size")),
                    avail=_int_or_none(item.get("avail")),
                )
            )
            add(item.get("children") or [])

    add(data["filesystems"])
    return tuple(mounts)


def parse_swaps(text: str) -> tuple[str, ...]:
    """Active swap devices or files from ``/proc/swaps`` (header line skipped)."""
    names: list[str] = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if fields:
            # /proc/swaps escapes spaces as \040 like fstab.
            names.append(fields[0].replace("\\040", " "))
    return tuple(names)


@dataclass(frozen=True)
class FstabEntry:
    """One non-comment line of an fstab file (fields unescaped)."""

    spec: str
    target: str
    fstype: str
    options: str
    line_no: int


def _fstab_unescape(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_fstab(text: str) -> tuple[FstabEntry, ...]:
    """Entries of an fstab file; blank, comment and malformed (< 2 field) lines are skipped."""
    entries: list[FstabEntry] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = stripped.split()
        if len(fields) < 2:
            continue
        entries.append(
            FstabEntry(
                spec=_fstab_unescape(fields[0]),
                target=posixpath.normpath(_fstab_unescape(fields[1])),
                fstype=fields[2] if len(fields) > 2 else "auto",
                options=fields[3] if len(fields) > 3 else "defaults",
                line_no=number,
            )
        )
    return tuple(entries)
