#!/usr/bin/env bash
# The Python package as a user installs it, and its tests against that install:
#   1. a venv over Debian's packages (numpy, pytest, Jupyter), and
#      `pip install --no-build-isolation .`: meson-python builds this meson
#      project (the same libmirrored) with Debian's meson, nothing downloaded;
#   2. the pytest suite (tests/python) on the installed package, from a
#      folder outside the clone, so `import mirrored` is the venv's;
#   3. the notebook examples/fashion_mnist.ipynb executed headless in a
#      Jupyter kernel of that venv (nbconvert --execute), on a few thousand
#      examples: a cell that fails fails this script. nbconvert runs as the
#      venv's module (not /usr/bin/jupyter-nbconvert, whose Python is
#      Debian's): then it finds the kernel installed into the venv.
# Arguments go to pip (scripts/test.sh passes --config-settings=setup-args=-Dcuda=disabled:
# its release build compiles the CUDA backend already).
# MIRRORED_VENV: the venv's folder (default build-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${MIRRORED_VENV:-$root/build-venv}
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
echo "-- pip install . into $venv"
"$venv/bin/pip" install --no-build-isolation --no-input -q "$@" .
run=$venv/run
rm -rf "$run" && mkdir -p "$run"
cd "$run"
echo "-- pytest on the installed package"
MIRRORED_TRAIN=$venv/bin/mirrored_train "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider \
    "$root/tests/python"
echo "-- the notebook, executed in a kernel of the venv"
"$venv/bin/python" -m ipykernel install --prefix "$venv" --name mirrored-venv \
    --display-name "Python (mirrored venv)" >/dev/null
cp "$root/examples/fashion_mnist.ipynb" .
MIRRORED_NOTEBOOK_EXAMPLES=${MIRRORED_NOTEBOOK_EXAMPLES:-3000} PYDEVD_DISABLE_FILE_VALIDATION=1 \
    "$venv/bin/python" -m nbconvert --to notebook --execute --ExecutePreprocessor.kernel_name=mirrored-venv \
    --ExecutePreprocessor.timeout=900 --output executed.ipynb fashion_mnist.ipynb
echo "-- python package: pip install, pytest and the notebook passed"
