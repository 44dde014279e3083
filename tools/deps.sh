#!/bin/sh
# deps.sh: install the Debian packages kwb builds against, and those its
# tests use (chromium-headless-shell renders report.html, man-db the man
# page, luajit drives libkwb.so through kwb/ffi.lua, python3-torch is the
# PyTorch a problem from a PyTorch module runs its reference with: CPU only,
# into /usr/bin/python3), printing what it
# installs (nothing when all are present).
set -e
pkgs="build-essential pkg-config liblua5.4-dev lua-lpeg-dev lua-cjson-dev libzstd-dev
libcurl4-openssl-dev libsqlite3-dev libedit-dev libffi-dev libssl-dev libseccomp-dev
libhiredis-dev redis-server openssl
chromium-headless-shell man-db luajit python3-torch"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "deps: all packages present"
    exit 0
fi
echo "deps: installing$missing"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
echo "deps: installed$missing"
