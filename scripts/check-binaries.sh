#!/usr/bin/env bash
# The static daemon links no part of swift-corelibs-foundation (and so no
# ICU): one call of a Foundation-only API (String(format:), NSLock, Thread,
# NSString's paths, CharacterSet, a String method lent by a dependency's
# `import Foundation`) brings 44 MB into it (docs/performance.md, small
# binaries). Checked on the release build's symbols, and the stripped size
# held to the 20 MB the issue asked for. Part of `make test`.
set -euo pipefail
dir=${1:-.build/release}
demangle=$(command -v swift-demangle || echo /opt/swift/usr/bin/swift-demangle)
fail=0
foundation=$(nm "$dir/lifecycled" | awk '{print $NF}' | grep -E '^\$s10Foundation|^\$s[A-Za-z0-9]*10FoundationE|^_?ucal_|^_?ures_' | head -5 || true)
if [ -n "$foundation" ]; then
    echo "lifecycled links swift-corelibs-foundation; for example:" >&2
    echo "$foundation" | "$demangle" --simplified | sed 's/^/  /' >&2
    # Which of the daemon's files call it: their objects' undefined Foundation symbols.
    objects=$(for m in lifecycled LifecycleDaemon LifecycleOS LifecycleCore LifecycleModel LifecycleControl \
        LifecycleWire; do find "$dir/$m.build" -name '*.o' 2>/dev/null; done)
    for o in $objects; do
        nm -u "$o" 2>/dev/null | awk '{print $NF}' | grep -E '^\$s10Foundation|^\$s[A-Za-z0-9]*10FoundationE' |
            "$demangle" --simplified | sed "s|^|  called from ${o#"$dir/"}: |" >&2 || true
    done
    echo "(use FoundationEssentials' API or LifecycleModel's helpers instead)" >&2
    fail=1
fi
limit=20000000
stripped=$(mktemp)
trap 'rm -f "$stripped"' EXIT
for b in lifecycled supervisorctl lifecycled-follow; do
    strip -o "$stripped" "$dir/$b"
    size=$(stat -c %s "$stripped")
    echo "$b: $size bytes stripped"
    if [ "$b" = lifecycled ] && [ "$size" -gt "$limit" ]; then
        echo "lifecycled is $size bytes stripped, over $limit" >&2
        fail=1
    fi
done
exit $fail
