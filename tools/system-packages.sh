#!/usr/bin/env bash
# Installs, from Debian's packages, each tool kerngen and its tests run that
# is missing here: `command package...` per line. Root with apt-get installs;
# anyone else is told what to install.
set -euo pipefail

NEEDED='
nasm nasm
gcc gcc
g++ g++
clang clang
objdump binutils
llvm-mca llvm
llvm-mca-19 llvm-19
x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64
wine wine64 wine
cmake cmake
ninja ninja-build
meson meson
cargo cargo
'

missing=()
while read -r tool packages; do
  [ -n "$tool" ] || continue
  command -v "$tool" >/dev/null 2>&1 || missing+=($packages)
done <<< "$NEEDED"
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing from Debian's packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update >/dev/null && apt-get install -y "${missing[@]}" >/dev/null; } \
    || { echo "error: could not install ${missing[*]}" >&2; exit 1; }
else
  echo "error: missing tools; install them (e.g. 'sudo apt-get install ${missing[*]}') and run make again" >&2
  exit 1
fi
