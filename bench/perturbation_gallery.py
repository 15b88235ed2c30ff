"""The pictures docs/perturbations.md shows: one scene's first delivered agentview image,
unperturbed and at each kind's levels 1-4 (one row a kind; semantic changes no image).
A case that cannot be set up (a scene kind with no room) is a black tile, and says why.

    python bench/perturbation_gallery.py --kinds camera,light,robot,noise   # libero_10 task 0
    python bench/perturbation_gallery.py --suite libero_10 --task 3 --kinds position,environment \
        --out docs/images/perturbations_scene_10-03.png
    python bench/perturbation_gallery.py --kinds object --task 3 \
        --out docs/images/object_levels.png                    # the object kind alone
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _common as c
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="libero_10")
    parser.add_argument("--task", type=int, default=0)
    parser.add_argument("--out", type=Path, default=c.ROOT / "docs" / "images" / "perturbations.png")
    parser.add_argument("--kinds", default=None, help="comma-separated kinds (default: all)")
    args = parser.parse_args()
    c.prepare_simulator()
    from PIL import Image

    from pytest_libero.adapters.libero import LiberoEpisode
    from pytest_libero.perturb.levels import LEVELS
    from pytest_libero.perturb.registry import names, perturbed
    from pytest_libero.protocol.errors import EnvironmentFault

    kinds = tuple(args.kinds.split(",")) if args.kinds else names()
    twin = c.catalog_entry(args.suite, args.task)

    def first_image(case: object) -> np.ndarray:
        try:
            episode = LiberoEpisode(case, track="rgb", control_cap=1)  # type: ignore[arg-type]
        except EnvironmentFault as exc:
            print(f"black tile: {exc}")
            return np.zeros_like(plain)
        try:
            image: np.ndarray = episode.observe(0, 0).images["agentview"]
            return image
        finally:
            episode.close()

    plain = np.zeros((1, 1, 3), dtype=np.uint8)
    plain = first_image(twin)
    rows = [np.concatenate([plain, *(first_image(perturbed(twin, kind, level)) for level in LEVELS)], 1)
            for kind in kinds]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.concatenate(rows, 0)).resize((5 * 160, len(kinds) * 160)).save(args.out)
    print(f"wrote {args.out}: rows {', '.join(kinds)}; columns: twin, levels {LEVELS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
