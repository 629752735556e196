# Sourced by bench/ab.sh and bench/ab3.sh: the checkouts of the two
# revisions an A/B compares. The caller sets repo (the repository) and tmp
# (its temporary directory) and declares worktrees=() before sourcing.

# checkout SIDE REV: a worktree of REV (or REV itself when it is a directory)
# in $tmp/src-SIDE; sets src_SIDE and label_SIDE. Never the working tree,
# which may hold someone's uncommitted edits.
checkout() {
  local side=$1 rev=$2 dir commit
  if [ -d "$rev" ]; then
    dir=$(cd "$rev" && pwd)
    printf -v "label_$side" '%s' "$dir@$(git -C "$dir" describe --always --dirty)"
  else
    commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}")
    dir=$tmp/src-$side
    git -C "$repo" worktree add --detach --quiet "$dir" "$commit"
    worktrees+=("$dir")
    printf -v "label_$side" '%s' "$rev=$(git -C "$repo" rev-parse --short "$commit")"
  fi
  printf -v "src_$side" '%s' "$dir"
}

# remove_worktrees: the worktrees checkout made, for the EXIT trap.
remove_worktrees() {
  local wt
  for wt in "${worktrees[@]}"; do git -C "$repo" worktree remove --force "$wt" 2>/dev/null || true; done
  git -C "$repo" worktree prune || true
}
