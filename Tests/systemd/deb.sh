#!/bin/bash
# The Debian package under a real systemd (systemd-nspawn, pure cgroup v2):
# installed with dpkg, the README's tour run against it, then an upgrade
# with apps running that none of them notices.
#
# usage: Tests/systemd/deb.sh FIRST.deb UPGRADE.deb     (make test-deb builds both)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# = 2 ] || { echo "usage: $0 FIRST.deb UPGRADE.deb"; exit 2; }
DEBS=$(mktemp -d /tmp/lifecycled-debs.XXXXXX)
trap 'rm -rf "$DEBS"' EXIT
cp "$1" "$DEBS/first.deb"
cp "$2" "$DEBS/upgrade.deb"
DEBS=$DEBS INSIDE=Tests/systemd/deb-inside.sh Tests/systemd/nspawn.sh v2
