"""Unpack a device bundle on arrival: ``python3 arrive.py PART_DIR DEST``.

Runs on the GPU machine with the standard library and Pillow. Each call brings one part;
its chunk is checked against the manifest and kept under DEST. When every part is
there, the chunks are joined, checked as a whole, unpacked into DEST/bundle, every file
checked by sha256 and every recompressed texture restored and checked by its pixels.
Exit 0: the bundle is ready (DEST/bundle); 3: parts are still to come (the message names
them); 2: something is damaged (the message names it; nothing runs).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from textures import SUFFIX, restore  # noqa: E402

READY = ".ready"
READ_BYTES = 1 << 20


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def damaged(message: str) -> int:
    print(f"device bundle: {message}; nothing was run", file=sys.stderr)
    return 2


def main(part: Path, dest: Path) -> int:
    manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
    bundle, chunks = dest / "bundle", dest / "chunks"
    if (bundle / READY).is_file() and (bundle / READY).read_text() == manifest["archive"]["sha256"]:
        print(f"device bundle: ready at {bundle} (unpacked by an earlier call)")
        return 0
    chunks.mkdir(parents=True, exist_ok=True)
    mine = [p for p in manifest["parts"] if (part / p["chunk"]).is_file()]
    for entry in mine:
        if sha256_of(part / entry["chunk"]) != entry["sha256"]:
            return damaged(f"{part / entry['chunk']} does not hash to its manifest's sha256")
        shutil.copyfile(part / entry["chunk"], chunks / entry["chunk"])
    missing = [p["name"] for p in manifest["parts"]
               if not ((chunks / p["chunk"]).is_file() and sha256_of(chunks / p["chunk"]) == p["sha256"])]
    if missing:
        print(f"device bundle: {', '.join(p['name'] for p in mine)} arrived and is kept in {chunks}; "
              f"still to come: {', '.join(missing)} (carry it in the next call, while the machine is warm)")
        return 3
    joined = dest / "bundle.tar.xz"
    digest = hashlib.sha256()
    with joined.open("wb") as stream:
        for entry in manifest["parts"]:
            block = (chunks / entry["chunk"]).read_bytes()
            digest.update(block)
            stream.write(block)
    if digest.hexdigest() != manifest["archive"]["sha256"]:
        return damaged("the joined parts do not hash to the manifest's archive sha256")
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    with tarfile.open(joined, mode="r:xz") as tar:
        tar.extractall(bundle, filter="data")
    joined.unlink()
    for name, expected in manifest["files"].items():
        path = bundle / name
        if not path.is_file() or sha256_of(path) != expected:
            return damaged(f"{name} is missing from the bundle or does not hash to its manifest's sha256")
    for name, texture in manifest.get("textures", {}).items():
        try:
            restore(bundle / (name + SUFFIX), bundle / name, texture["pixels"], texture["mode"])
        except (OSError, ValueError) as exc:
            return damaged(str(exc))
    shutil.rmtree(chunks)
    (bundle / READY).write_text(manifest["archive"]["sha256"])
    print(f"device bundle: {len(manifest['files'])} files unpacked and checked, "
          f"{len(manifest.get('textures', {}))} textures restored and checked by their pixels, at {bundle}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python3 arrive.py PART_DIR DEST")
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
