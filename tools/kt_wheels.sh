#!/usr/bin/env bash
# tools/kt_wheels.sh: the wheels tests/gpu/kt_compare installs on the GPU
# machine (Python 3.12, no network there): Kernel Tuner 1.4.0 and what it
# imports beyond the machine's numpy, packaging and CuPy, into .whl/ (ignored
# by git; carry it). Run here, where PyPI is reachable.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
pip_dl() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$@"
}
pip_dl kernel_tuner==1.4.0 python-constraint2 xmltodict jsonschema jsonschema-specifications referencing \
  rpds-py attrs typing-extensions
ls -l .whl
