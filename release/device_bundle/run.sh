#!/usr/bin/env bash
# One device call: bash PART/run.sh [--smoke]. Unpacks this part of the bundle (under
# PYTEST_LIBERO_BUNDLE_DEST, /tmp/pytest-libero-bundle by default); once every part has
# arrived, runs the benchmark and the demo and writes what they found under $OUT.
set -euo pipefail
part=$(cd "$(dirname "$0")" && pwd)
dest=${PYTEST_LIBERO_BUNDLE_DEST:-/tmp/pytest-libero-bundle}
python=${PYTEST_LIBERO_BUNDLE_PYTHON:-python3}
out=${OUT:-$PWD/pytest-libero-bundle-out}
set +e
"$python" "$part/arrive.py" "$part" "$dest"
arrived=$?
set -e
if [ "$arrived" -eq 3 ]; then exit 0; fi       # parts still to come: the next call brings them
if [ "$arrived" -ne 0 ]; then exit "$arrived"; fi
exec "$python" "$dest/bundle/device_run.py" --out "$out" --python "$python" "$@"
