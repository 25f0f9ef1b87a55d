# Sourced by the lab's build scripts (not run). They reuse directories between runs (wheel
# caches, the wheelhouse, the CUDA repository) whose contents end up executed, often by root:
# such a directory must not be one another local user could have made or can still change.
#
#   owned_dir DIR    # creates DIR if missing; refuses it (exit 1) unless it is safe to reuse
#
# Safe: DIR is a directory owned by the caller that neither its group nor others can write, and
# every directory above it (on the path as given and as resolved) belongs to the caller or root
# and is writable by others only with the sticky bit, so nobody else can swap DIR for their own.
owned_dir() {
  local dir=$1 uid real path mode owner
  uid=$(id -u)
  mkdir -p "$dir"
  real=$(cd "$dir" && pwd -P)
  read -r owner mode < <(stat -c '%u %a' "$real")
  if [ ! -d "$real" ] || [ "$owner" != "$uid" ] || (( 8#$mode & 8#022 )); then
    echo "$(basename "$0"): $dir is not a directory of user $uid that only its owner can write; refusing to use it" >&2
    exit 1
  fi
  for path in "$(dirname "$(realpath -s "$dir")")" "$(dirname "$real")"; do
    while :; do
      read -r owner mode < <(stat -L -c '%u %a' "$path")
      # Another user's directory, or one group or others can write without the sticky bit:
      # they could rename what lies below it and put their own in its place.
      if { [ "$owner" != 0 ] && [ "$owner" != "$uid" ]; } || { (( 8#$mode & 8#022 )) && ! (( 8#$mode & 8#1000 )); }; then
        echo "$(basename "$0"): $dir lies under $path, which another user can change; refusing to use it" >&2
        exit 1
      fi
      [ "$path" = / ] && break
      path=$(dirname "$path")
    done
  done
}

# Labs, scenarios and test processes start side by side and share these caches. lock_script
# LOCKFILE "$@" runs the rest of the calling script under an exclusive lock on LOCKFILE (in a
# directory owned_dir accepted): it re-executes the script once through flock(1). The waiters
# then find the work done. --close keeps the lock out of what the script leaves running
# (gpg-agent), so the lock ends with the script. tests/sglang_wheels.py takes the wheel
# cache's lock (its .lock) with flock(2) too.
lock_script() {
  local lock=$1
  shift
  if [ "${BLACKWELL_LOCK_HELD:-}" != "$lock" ]; then
    BLACKWELL_LOCK_HELD=$lock exec flock --close "$lock" "$0" "$@"
  fi
}
