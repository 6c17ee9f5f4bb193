#!/bin/sh
# emu_cu_wrap.sh IN.cu OUT.cc: a C++ source that includes IN.cu by absolute
# path, so meson compiles a CUDA file with the C++ compiler (meson.build's
# emu_cu_gen) and IN.cu's own #includes resolve next to it.
set -e
printf '#include "%s"\n' "$(realpath "$1")" > "$2"
