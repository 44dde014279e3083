# tests/gpu/setup.sh: the common start of the GPU-machine scripts, sourced
# after their usage checks:  . "$(dirname "$0")/setup.sh" NAME
# Moves to the repository root, requires the carried ./kwb (these scripts
# never build), sets out ($OUT, else .) and a scratch directory work that
# holds kwb's cache and CUDA's compute cache (fresh each run: cold compiles,
# no candidates from an earlier run) and is removed on exit.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
[ -x ./kwb ] || { echo "tests/gpu/$1: ./kwb is not built"; exit 2; }
out="${OUT:-.}"
work="$(mktemp -d "/tmp/kwb-$1.XXXXXX")" || exit 2
trap 'rm -rf "$work"' EXIT
export KWB_CACHE="$work/kwb.db" CUDA_CACHE_PATH="$work/nvcache"
