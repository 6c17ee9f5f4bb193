#!/usr/bin/env bash
# Installs what mirrored needs from Debian 12 packages (only what is missing).
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config libopenblas-dev libhdf5-dev zlib1g-dev
      libinih-dev libzip-dev libjansson-dev libpng-dev libjpeg62-turbo-dev check librandom123-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist
      python3-h5py gnuplot-nox clang
      python3-numpy python3-pytest python3-venv python3-mesonpy python3-matplotlib
      python3-ipykernel python3-nbclient jupyter-nbconvert)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all installed"
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
