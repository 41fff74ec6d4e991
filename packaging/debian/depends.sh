#!/bin/sh
# The package's Depends, from what its ELF files need, as dpkg-shlibdeps
# reads their libraries and symbols. (A hand-written list said libc6 >= 2.31
# and libsystemd0 >= 244, for binaries that need glibc 2.35 and libsystemd
# 247: dpkg accepted the package where it could not run.)
#   depends.sh STAGE    prints the Depends field's value
set -eu
stage=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/debian"
printf 'Source: lifecycled\n\nPackage: lifecycled\nArchitecture: any\n' > "$work/debian/control"
files=$(find "$stage" -path "$stage/DEBIAN" -prune -o -type f -print | while read -r f; do
    if readelf -h "$f" >/dev/null 2>&1; then echo "$f"; fi
done)
[ -n "$files" ] || { echo "depends.sh: no ELF file under $stage" >&2; exit 1; }
args=$(for f in $files; do printf -- '-e%s ' "$f"; done)
# Its warnings (the binaries' $ORIGIN run path, files not yet installed)
# are about a Debian source tree, which this is not: shown only if it fails.
# shellcheck disable=SC2086  # one word per file
if ! depends=$(cd "$work" && dpkg-shlibdeps -O $args 2> "$work/errors"); then
    cat "$work/errors" >&2
    exit 1
fi
printf '%s\n' "${depends#shlibs:Depends=}"
