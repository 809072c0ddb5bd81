"""Unpacking the zip of an exported dataset (what the studio offers for download, and takes back) safely.

A zip says how big each file is, but the numbers are the sender's: a 256 KB archive once unpacked to 250 MB and
took an import to 2.4 GB of memory. So every file is unpacked in chunks, counting what really comes out: it stops
at once when a file passes its declared size, when the whole passes MAX_UNZIPPED_BYTES (the dataset limit), or when
a file comes out more than MAX_RATIO times larger than it was packed (exported JSON packs about 5 to 15 times; a
zip bomb hundreds of times). Paths that would land outside the folder, and links, are refused before anything is
written."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from wmstudio.problems import InvalidInput, Problem

MAX_UNZIPPED_BYTES = 1_000_000_000
MAX_RATIO = 100  # unpacked / packed size of one file
SMALL_FILE = 1 << 20  # a file under this size unpacked is never refused for its ratio (a card of repeated lines)
CHUNK = 1 << 20


def unzip_dataset(archive: Path, into: Path) -> Path:
    """Unpack the exported zip `archive` into the folder `into` and return the dataset folder inside it (the one
    holding data/); InvalidInput naming the file and the limit for an unsafe or oversized archive."""
    archive, into = Path(archive), Path(into)
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            _refuse_before_reading(archive, members, into)
            total = 0
            for member in members:
                total = _unpack(bundle, member, into, total, archive.name)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as err:
        raise InvalidInput(Problem("file", f"{archive.name} is not a readable zip ({err}): upload the zip the export "
                                           "made")) from None
    for candidate in sorted(into.rglob("data"), key=lambda p: len(p.parts)):
        if candidate.is_dir():
            return candidate.parent
    raise InvalidInput(Problem("file", f"{archive.name} holds no data/ folder: it is not an exported dataset"))


def _refuse_before_reading(archive: Path, members: list[zipfile.ZipInfo], into: Path) -> None:
    """What the zip's own directory already gives away: unsafe paths, links, declared sizes and ratios."""
    declared = sum(m.file_size for m in members)
    if declared > MAX_UNZIPPED_BYTES:
        raise InvalidInput(Problem("file", f"{archive.name} says it unpacks to {declared:,} bytes, over the "
                                           f"{MAX_UNZIPPED_BYTES:,}-byte limit: split the dataset"))
    root = into.resolve()
    for member in members:
        if not (into / member.filename).resolve().is_relative_to(root):
            raise InvalidInput(Problem("file", f"the zip holds an unsafe path {member.filename!r}"))
        if stat.S_ISLNK(member.external_attr >> 16):
            raise InvalidInput(Problem("file", f"the zip holds a link {member.filename!r}: exports hold files only"))
        _refuse_ratio(archive, member, member.file_size)


def _refuse_ratio(archive: Path, member: zipfile.ZipInfo, unpacked: int) -> None:
    if unpacked > SMALL_FILE and unpacked > MAX_RATIO * max(member.compress_size, 1):
        raise InvalidInput(Problem("file", f"{member.filename} in {archive.name} unpacks over {MAX_RATIO} times its "
                                           "packed size: a zip bomb, not an export (re-export the dataset)"))


def _unpack(bundle: zipfile.ZipFile, member: zipfile.ZipInfo, into: Path, total: int, name: str) -> int:
    """Write one member in chunks, counting real bytes against its declared size, the ratio and the total; the
    total so far is returned."""
    target = into / member.filename
    if member.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        return total
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with bundle.open(member) as source, target.open("wb") as out:
        while chunk := source.read(CHUNK):
            written += len(chunk)
            total += len(chunk)
            if written > member.file_size:
                raise InvalidInput(Problem("file", f"{member.filename} in {name} unpacks to more than the "
                                                   f"{member.file_size:,} bytes the zip declares: a damaged or "
                                                   "forged archive (re-export the dataset)"))
            if total > MAX_UNZIPPED_BYTES:
                raise InvalidInput(Problem("file", f"{name} unpacks to over {MAX_UNZIPPED_BYTES:,} bytes: split the "
                                                   "dataset"))
            _refuse_ratio(Path(name), member, written)
            out.write(chunk)
    return total
