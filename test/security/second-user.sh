#!/bin/sh
# Helpers for tests that need a second local user: sourced. As root, it
# makes (once) the system user dtensor-other and runs commands as it with
# setpriv; as anyone else it cannot, and the test exits 77 (skipped) saying
# why.
other_user=dtensor-other
need_other_user() {
  if [ "$(id -u)" != 0 ]; then
    echo "skipped: needs root to act as a second local user ($other_user)"
    exit 77
  fi
  if ! id "$other_user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$other_user" ||
      { echo "skipped: cannot create the user $other_user"; exit 77; }
  fi
  other_uid=$(id -u "$other_user")
  other_gid=$(id -g "$other_user")
}
# Runs "$@" as the other user.
as_other() {
  setpriv --reuid="$other_uid" --regid="$other_gid" --clear-groups -- "$@"
}
