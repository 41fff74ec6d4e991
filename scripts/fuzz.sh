#!/usr/bin/env bash
# Fuzzes the app-channel decoder, the control-request parser (the hand
# reader against JSONDecoder) and the
# status answer's hand-written reader with
# libFuzzer (swiftc -sanitize=fuzzer,address), and the C client's wire
# decoder, which parses untrusted bytes inside apps (clang
# -fsanitize=fuzzer,address,undefined), and the Swift and C decoders
# against each other, starting from the corpus in Fuzz/corpus. Usage: scripts/fuzz.sh [SECONDS per target, default 30].
# New inputs found go to a scratch copy of the corpus; crashes are written
# to .build/fuzz/ and fail the run. Add interesting finds to Fuzz/corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
out=.build/fuzz
mkdir -p "$out"

build() {   # name, sources...
    local name=$1; shift
    swiftc -sanitize=fuzzer,address -parse-as-library -O "$@" -o "$out/$name" 2>&1 \
        | { grep -v -e '^warning: ' -e 'ld: warning' || true; }
}
build_c() {   # name, sources...: undefined behaviour aborts, as a crash does
    local name=$1; shift
    "${CLANG:-clang}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fuse-ld=lld -O1 -g \
        -Wall -Wextra -Werror -Iclib/include -Iclib/src "$@" -o "$out/$name"
}
build app-channel Sources/LifecycleModel/*.swift Sources/LifecycleWire/Wire.swift Fuzz/app_channel.swift
control=(Sources/LifecycleControl/ControlProtocol.swift Sources/LifecycleControl/ControlStatus.swift
    Sources/LifecycleControl/ControlRecords.swift Sources/LifecycleControl/ShownReport.swift)
readers=(Sources/LifecycleControl/StatusJSON.swift Sources/LifecycleControl/JSONStreamEncoder.swift
    Sources/LifecycleControl/StatusFields.swift)
build control-request Sources/LifecycleModel/*.swift "${control[@]}" "${readers[@]}" \
    Sources/LifecycleControl/RequestJSON.swift Fuzz/control_request.swift
build status-reader Sources/LifecycleModel/*.swift "${control[@]}" "${readers[@]}" Fuzz/status_reader.swift
# Swift's decoders against the C client's: wire.c built by clang (coverage, ASan), called through wire.h.
build wire-differential Sources/LifecycleModel/*.swift Sources/LifecycleWire/Wire.swift Fuzz/wire_differential.swift \
    -import-objc-header clib/src/wire.h -Xcc -Iclib/include "$(clang -fsanitize=fuzzer-no-link,address -O1 -g \
    -Iclib/include -c clib/src/wire.c -o "$out/wire-differential.o" && echo "$out/wire-differential.o")"
build_c wire-c Fuzz/wire_c.c clib/src/wire.c

status=0
for target in app-channel control-request status-reader wire-c wire-differential; do
    work=$(mktemp -d)
    cp Fuzz/corpus/"$target"/* "$work"/
    echo "fuzzing $target for ${seconds}s"
    if ! ASAN_OPTIONS=detect_leaks=0 SWIFT_BACKTRACE=enable=no "$out/$target" -max_total_time="$seconds" -max_len=8192 \
            -artifact_prefix="$out/$target-" -print_final_stats=1 "$work" > "$out/$target.log" 2>&1; then
        echo "FAILED  $target: see $out/$target.log and $out/$target-crash-*"
        tail -30 "$out/$target.log"
        status=1
    else
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$target.log" | grep -o '[0-9]*$' || echo "?")
        echo "ok      $target: $runs inputs, no crash ($(ls "$work" | wc -l) in the corpus)"
    fi
    rm -rf "$work"
done
exit $status
