#!/usr/bin/env bash
# The pure cgroup v2 stage of `make test`: the end-to-end tests of
# Tests/EndToEndTests/PureV2Tests.swift, in the virtual machine of
# scripts/vm.sh (this machine's own root, Debian's kernel, pure cgroup v2
# with the memory and cpu controllers), run from the test binary already
# built (swift build --build-tests). Three boots: one without swap (OOM
# kills where memory alone runs out), one with a 512 MiB swap device
# (reclaim), and one with a real systemd as PID 1 running the shipped units
# (Tests/vm/systemd-inside.sh: the apps' scope with its delegated
# controllers, the slice's cap on the foreground's protection, a kernel OOM
# kill under OOMPolicy=continue, kill -9).
# Each is bounded; a hung guest fails the stage, and a machine that cannot
# boot a guest at all fails it loudly (scripts/vm.sh, exit 125).
#
# usage: Tests/vm/run.sh [FILTER]
#   FILTER  one test or suite, as swift test --filter takes it, e.g.
#           Tests/vm/run.sh theKernelKillsAtTheAppsOwnLimit
#           (a name of PureV2SwapTests boots with swap, any other without)
set -euo pipefail
cd "$(dirname "$0")/../.."
TESTS=${TESTS:-.build/debug/lifecycledPackageTests.xctest}
[[ -x $TESTS ]] || { echo "Tests/vm/run.sh: $TESTS is missing: swift build --build-tests first" >&2; exit 1; }

guest() {
    local filter=$1
    shift
    echo "== pure cgroup v2 in a virtual machine: $filter"
    scripts/vm.sh "$@" -- "$TESTS" --testing-library swift-testing --filter "$filter"
}

if [[ -n ${1:-} ]]; then
    swap=()
    if sed -n '/struct PureV2SwapTests/,$p' Tests/EndToEndTests/PureV2Tests.swift | grep -qF -- "$1"; then
        swap=(--swap 512M)
    fi
    guest "$1" "${swap[@]}" --timeout 300
    exit
fi
guest PureV2MemoryTests --timeout 420
guest PureV2SwapTests --swap 512M --timeout 240
# Prewarming's budget and freezer where the memory controller measures what a prewarm holds.
guest EndToEndTests.PrewarmTests --timeout 240
echo "== pure cgroup v2 in a virtual machine: the shipped units under systemd"
scripts/vm.sh --systemd --timeout 300 -- env BIN="$(realpath "$(dirname "$TESTS")")" Tests/vm/systemd-inside.sh
