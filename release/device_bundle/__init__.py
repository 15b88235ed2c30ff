"""An offline bundle of pytest-libero for an air-gapped GPU machine (docs/scale.md).

``python -m release.device_bundle OUT`` builds, from this checkout and the simulator
stack installed beside it, a folder that runs the GPU benchmark and the demo on a
machine with no package index: Python 3.12 with numpy, pytest and the usual scientific
packages, none of the simulator. What it holds, and why:

- ``site/``: the project's built wheel unpacked, with every run-time dependency the
  machine's image lacks (``gpu_image.txt``) as cp312 wheels unpacked, and of robosuite
  and LIBERO their code plus only the asset files real runs opened here;
- ``assets/``: LIBERO's namespace asset package, apart from ``site/`` (LIBERO refuses
  one that two ``sys.path`` entries reach, which is what a shared folder becomes);
- ``tools/``: ``bench/`` and ``harness/`` of the checkout, which the benchmark imports;
- ``debs/``: Debian's GL and EGL loaders, unpacked there only when the machine lacks them;
- the lot packed into parts (``part-N/``) small enough to carry one per device call, each
  holding ``run.sh`` and ``arrive.py``; ``manifest.json`` in every part names every file
  with its sha256, and every recompressed texture with its pixel hash.

The asset files are found by tracing (strace) the benchmark's and the demo's own runs.
"""
