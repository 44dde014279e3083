#!/bin/sh
# tools/kwb_at.sh COMMIT OUT: build the kwb of COMMIT (a worktree in a
# scratch directory, removed after) and copy its binary to OUT, with the
# commit it was built from in OUT.commit and the files its runs read from the
# tree (recipes, kernels, the context documents) in OUT.tree.tar.gz: the
# binary carries its own Lua, but reads those from where it runs, and a newer
# tree's kernels may not fit its plans. tests/gpu/integrity_cost compares
# such a build (OUT = build/kwb-old, run in its own tree) with ./kwb on the
# GPU machine.
set -e
[ $# -eq 2 ] || { echo "usage: tools/kwb_at.sh COMMIT OUT" >&2; exit 2; }
commit=$(git rev-parse --verify "$1^{commit}") || { echo "tools/kwb_at.sh: no commit $1" >&2; exit 2; }
dir=$(mktemp -d /tmp/kwb-at.XXXXXX)
trap 'git worktree remove --force "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
git worktree add --detach "$dir" "$commit" >/dev/null
make -C "$dir" -j"$(nproc)" kwb >/dev/null
mkdir -p "$(dirname "$2")"
cp "$dir/kwb" "$2"
git archive --format=tar.gz -o "$2.tree.tar.gz" "$commit" recipes kernels hwdocs modeldocs
echo "$commit $(git log -1 --format=%s "$commit" | cut -c1-72)" > "$2.commit"
echo "tools/kwb_at.sh: $2 is kwb at $(cut -c1-12 "$2.commit")"
