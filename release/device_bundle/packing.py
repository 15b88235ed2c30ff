"""The staged tree as parts one device call can carry, and the manifest that checks them.

The tree goes into one xz-compressed tar (sorted names, fixed owner and time: the same
tree gives the same bytes), cut into chunks of at most the part size, one per
``part-N/`` folder. Each part also holds what unpacks it (``run.sh``, ``arrive.py``,
``textures.py``) and ``manifest.json``: every chunk's and every file's sha256 and each
recompressed texture's pixel hash. The machine keeps the chunks that came in earlier
calls while it stays warm; the call that brings the last one unpacks and runs.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import shutil
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
SCHEMA = "pytest-libero-device-bundle/1"
ARCHIVE = "bundle.tar.xz"
CARRIED = ("run.sh", "arrive.py", "textures.py")
"""Each part's own copies: the part that arrives last must be able to unpack alone."""
READ_BYTES = 1 << 20
PRESET = 6
"""xz's preset for the archive; a lower one packs several times faster into more bytes
(the builder's own test packs at 0)."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def archive(stage: Path, target: Path, preset: int = PRESET) -> None:
    """``stage`` as one .tar.xz at ``target``, in sorted order, at xz's ``preset``."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(stage.rglob("*")):
            tar.add(path, arcname=path.relative_to(stage).as_posix(), recursive=False,
                    filter=_normalised)
    target.write_bytes(lzma.compress(raw.getvalue(), preset=preset))


def write_parts(stage: Path, out: Path, part_bytes: int, extra: Mapping[str, Any],
                preset: int = PRESET) -> list[Path]:
    """Pack ``stage`` into ``out/part-N`` folders of at most ``part_bytes`` each (the
    chunk plus the unpacking files and manifest)."""
    files = {path.relative_to(stage).as_posix(): file_sha256(path)
             for path in sorted(stage.rglob("*")) if path.is_file()}
    out.mkdir(parents=True, exist_ok=True)
    whole = out / ARCHIVE
    archive(stage, whole, preset)
    here = Path(__file__).parent
    draft = json.dumps({"schema": SCHEMA, **extra, "files": files}, indent=0, sort_keys=True)
    overhead = sum((here / name).stat().st_size for name in CARRIED) + len(draft.encode()) + 64_000
    size = part_bytes - overhead
    if size <= 0:
        raise SystemExit(f"device bundle: a part of {part_bytes} bytes cannot hold its own "
                         f"unpacking files and manifest ({overhead} bytes)")
    data = whole.read_bytes()
    chunks = [data[start:start + size] for start in range(0, len(data), size)]
    whole.unlink()
    parts = [{"name": f"part-{n}", "chunk": f"{ARCHIVE}.{n:03d}", "bytes": len(chunk),
              "sha256": hashlib.sha256(chunk).hexdigest()} for n, chunk in enumerate(chunks, 1)]
    manifest = {"schema": SCHEMA, **extra, "archive": {"sha256": hashlib.sha256(data).hexdigest(),
                                                         "bytes": len(data)},
                "parts": parts, "files": files}
    folders = []
    for part, chunk in zip(parts, chunks):
        folder = out / part["name"]
        folder.mkdir(parents=True)
        (folder / part["chunk"]).write_bytes(chunk)
        for name in CARRIED:
            shutil.copy2(here / name, folder / name)
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=0, sort_keys=True), encoding="utf-8")
        total = sum(p.stat().st_size for p in folder.iterdir())
        if total > part_bytes:
            raise SystemExit(f"device bundle: {folder} came to {total} bytes, over {part_bytes}")
        folders.append(folder)
    return folders
