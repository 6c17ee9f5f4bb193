#!/usr/bin/env bash
# The Python package as a user installs it, and its tests against that install:
#   1. `pip wheel .` in a venv over Debian's packages (numpy, pytest,
#      Jupyter) with --no-build-isolation: meson-python builds this meson
#      project (the same libmirrored) with Debian's meson, nothing
#      downloaded; the wheel is installed into that venv;
#   2. the pytest suite (tests/python) on the installed package, from a
#      folder outside the clone, so `import mirrored` is the venv's;
#   3. the same wheel in a fresh venv of the `python3` on PATH (pyenv,
#      conda or Debian's: whichever a user has), with numpy, ipykernel,
#      nbconvert and matplotlib from PyPI; the venv registered as a Jupyter kernel as the
#      README says (`python -m ipykernel install --user --name ...`, under a
#      HOME of its own), and examples/fashion_mnist.ipynb executed headless
#      in that kernel on a few thousand examples: a cell that fails fails
#      this script.
# Arguments go to pip (scripts/test.sh passes --config-settings=setup-args=-Dcuda=disabled:
# its release build compiles the CUDA backend already).
# MIRRORED_VENV: the Debian venv's folder (default build-venv); the fresh
# venv is beside it ($MIRRORED_VENV-path).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${MIRRORED_VENV:-$root/build-venv}
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
wheels=$venv/wheels
rm -rf "$wheels"
echo "-- pip wheel . in $venv"
"$venv/bin/pip" wheel --no-build-isolation --no-deps --no-input -q -w "$wheels" "$@" .
wheel=$(ls "$wheels"/mirrored-*.whl)
"$venv/bin/pip" install --no-deps --force-reinstall --no-input -q "$wheel"
run=$venv/run
rm -rf "$run" && mkdir -p "$run"
cd "$run"
echo "-- pytest on the installed package"
MIRRORED_TRAIN=$venv/bin/mirrored_train "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider \
    "$root/tests/python"

py=$(command -v python3)
fresh=$venv-path
echo "-- the wheel in a fresh venv of $py ($("$py" --version 2>&1))"
rm -rf "$fresh"
"$py" -m venv "$fresh"
"$fresh/bin/python" -m pip install --no-input -q --disable-pip-version-check "$wheel" ipykernel \
    nbconvert matplotlib
echo "-- the notebook, executed in a kernel of that venv"
home=$fresh/home
mkdir -p "$home"
HOME=$home "$fresh/bin/python" -m ipykernel install --user --name mirrored \
    --display-name "Python (mirrored)" >/dev/null
cp "$root/examples/fashion_mnist.ipynb" .
HOME=$home MIRRORED_NOTEBOOK_EXAMPLES=${MIRRORED_NOTEBOOK_EXAMPLES:-3000} \
    PYDEVD_DISABLE_FILE_VALIDATION=1 "$fresh/bin/python" -m nbconvert --to notebook --execute \
    --ExecutePreprocessor.kernel_name=mirrored --ExecutePreprocessor.timeout=900 \
    --output executed.ipynb fashion_mnist.ipynb
echo "-- python package: pip wheel, pytest and the notebook in a venv of $py passed"
