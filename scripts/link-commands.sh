#!/usr/bin/env bash
# Make this checkout's commands reachable the way a user and an /etc/fstab line expect
# (run by scripts/install.sh, after the venv is installed):
#   /usr/local/bin/kafkafs            -> ./.venv/bin/kafkafs              (on PATH)
#   /sbin/mount.fuse.kafkafs          -> ./.venv/bin/mount.fuse.kafkafs   (mount(8) runs
#     helpers from its own search path, util-linux's /sbin:/sbin/fs.d:/sbin/fs, not PATH;
#     on merged-/usr systems /sbin is /usr/sbin)
# Idempotent: a link already pointing there is left as it is; one pointing elsewhere (another
# checkout) is moved here; a file that is not a link (a `pip install` as root) is left alone,
# with a note. KAFKAFS_BIN_DIR, KAFKAFS_HELPER_DIR and KAFKAFS_VENV change the places.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${KAFKAFS_VENV:-$PWD/.venv}
BIN_DIR=${KAFKAFS_BIN_DIR:-/usr/local/bin}
HELPER_DIR=${KAFKAFS_HELPER_DIR:-/sbin}
link_into() {  # link_into TARGET DIR: DIR/$(basename TARGET) -> TARGET
  local target=$1 dest sudo=""
  dest=$2/$(basename "$1")
  if [ -L "$dest" ] && [ "$(readlink "$dest")" = "$target" ]; then
    return 0
  fi
  if [ -e "$dest" ] && [ ! -L "$dest" ]; then
    echo "link-commands.sh: $dest exists and is not a link: left as it is" >&2
    return 0
  fi
  mkdir -p "$2" 2>/dev/null || true
  if [ ! -w "$2" ]; then  # not root: sudo, as install.sh's apt step
    if ! command -v sudo >/dev/null; then
      echo "link-commands.sh: cannot write $2 (not root, no sudo): $dest not made" >&2
      return 0
    fi
    sudo="sudo"
  fi
  $sudo mkdir -p "$2"
  $sudo ln -sfn "$target" "$dest"
  echo "link-commands.sh: $dest -> $target"
}

link_into "$VENV/bin/kafkafs" "$BIN_DIR"
link_into "$VENV/bin/mount.fuse.kafkafs" "$HELPER_DIR"
