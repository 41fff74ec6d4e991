#!/bin/bash
# Runs inside the container booted by deb.sh (nspawn.sh with DEBS=): the
# package installed with dpkg, the README's tour, an upgrade with apps
# running, a removal. Prints PASS/FAIL lines; exits 1 when anything failed.
set -u
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
CTL=supervisorctl
export DEBIAN_FRONTEND=noninteractive
apps() { $CTL status --json | python3 -c '
import json, sys
for a in json.load(sys.stdin)["apps"]:
    if a.get("pid"): print(a["name"], a["state"], a["pid"])'; }
journal_has() {  # tag, text: journald writes soon after; each look is an answer
    local i
    for i in $(seq 1 300); do
        journalctl --sync 2>/dev/null
        journalctl -t "$1" -o cat --no-pager | grep -q "$2" && return 0
        sleep 0.01
    done
    return 1
}

# The container sees the host's root through an overlay: hide the toolchain
# (the package must bring what it needs) and anything of lifecycled there.
mkdir -p /tmp/empty
[ -d /opt/swift ] && mount --bind /tmp/empty /opt/swift
rm -f /usr/local/bin/lifecycled /usr/local/bin/supervisorctl /etc/systemd/system/lifecycled.*

dpkg -i /opt/debs/first.deb > /tmp/dpkg-first.log 2>&1 \
    && pass "dpkg -i: lifecycled $(dpkg-query -W -f='${Version}' lifecycled) installed" \
    || { fail "dpkg -i: $(tail -5 /tmp/dpkg-first.log)"; exit 1; }
ldd /usr/bin/lifecycled /usr/bin/supervisorctl /usr/bin/lifecycled-follow | grep -q libswift \
    && fail "the binaries need the Swift runtime: $(ldd /usr/bin/lifecycled | grep swift | head -2)" \
    || pass "the binaries need no Swift toolchain (no libswift in ldd; /opt/swift hidden)"
# What the package says it needs covers what its files load: each library
# belongs to a package its Depends names, and libc6's version there is at
# least the newest GLIBC_ symbol version any of them uses.
depends=$(dpkg-query -W -f='${Depends}' lifecycled)
elves=$(dpkg -L lifecycled | while read -r f; do
    if [ -f "$f" ] && readelf -h "$f" >/dev/null 2>&1; then echo "$f"; fi
done)
unnamed=
for f in $elves; do  # each file's own libraries (NEEDED), not theirs
    for soname in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        lib=$(ldd "$f" | awk -v n="$soname" '$1 == n && $3 ~ /^\// {print $3} $1 ~ ("/" n "$") {print $1}')
        pkg=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null || echo "?: ")
        pkg=${pkg%%:*}
        case ", $depends," in *", $pkg "* | *", $pkg,"*) ;; *) unnamed="$unnamed $soname ($pkg, by $f)" ;; esac
    done
done
glibc=$(objdump -T $elves 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' | sort -uV | tail -1 | sed 's/GLIBC_//')
libc=$(printf '%s\n' "$depends" | sed -n 's/.*libc6 (>= \([^)]*\)).*/\1/p')
if [ -z "$unnamed" ] && [ -n "$libc" ] && dpkg --compare-versions "$libc" ge "$glibc"; then
    pass "Depends covers what the package's files load (libc6 >= $libc, newest symbol GLIBC_$glibc): $depends"
else
    fail "Depends ($depends) misses:${unnamed:- nothing unnamed}; libc6 >= ${libc:-?} against GLIBC_$glibc"
fi
for f in /usr/share/man/man1/supervisorctl.restart.1 /usr/share/bash-completion/completions/supervisorctl \
    /usr/share/zsh/site-functions/_supervisorctl /usr/share/fish/vendor_completions.d/supervisorctl.fish \
    /usr/lib/pkgconfig/lifecycle.pc /usr/include/lifecycle.h /etc/lifecycled/apps/recorder.toml; do
    [ -f "$f" ] || fail "missing $f"
done
pass "man pages, completions, the C library's pkg-config file and the example config installed"
[ -f /usr/lib/systemd/user/lifecycled-follow.service ] && grep -q '^ExecStart=/usr/bin/lifecycled-follow$' /usr/lib/systemd/user/lifecycled-follow.service \
    && /usr/bin/lifecycled-follow --help > /dev/null \
    && pass "the compositor's follower and its user unit installed (docs/focus.md)" \
    || fail "lifecycled-follow: $(ls -l /usr/bin/lifecycled-follow /usr/lib/systemd/user/lifecycled-follow.service 2>&1)"
[ "$(systemctl is-enabled lifecycled.socket)" = enabled ] && [ "$(systemctl is-enabled lifecycled.service)" = enabled ] \
    && [ "$(systemctl is-active lifecycled.socket)" = active ] \
    && pass "socket and service enabled, the socket listening" \
    || fail "after install: socket $(systemctl is-enabled lifecycled.socket)/$(systemctl is-active lifecycled.socket), service $(systemctl is-enabled lifecycled.service)/$(systemctl is-active lifecycled.service)"

# Socket activation: stopped, the daemon is started by the first command.
systemctl stop lifecycled.service
$CTL status > /tmp/status.txt && [ "$(systemctl is-active lifecycled.service)" = active ] \
    && pass "socket activation: supervisorctl status started the service" \
    || fail "socket activation: $(systemctl is-active lifecycled.service); $(cat /tmp/status.txt)"

# The README's tour.
$CTL activate recorder >/dev/null && $CTL activate worker >/dev/null && $CTL home >/dev/null \
    && $CTL status worker | grep -q "^worker  *background" \
    && pass "tour: activate recorder, activate worker, home: worker in the background with its task" \
    || fail "tour: $(apps | tr '\n' ';')"
$CTL events | grep -q "worker  acknowledged didEnterBackground" && pass "tour: events" || fail "tour: events"
[ "$(head -3 /tmp/lifecycled-recorder.events 2>/dev/null | tr '\n' ' ')" = "willFinishLaunching didFinishLaunching didBecomeActive " ] \
    && pass "tour: the recorder's events, in order" || fail "tour: recorder: $(cat /tmp/lifecycled-recorder.events 2>&1 | tr '\n' ' ')"
$CTL launch --background saver >/dev/null
$CTL interruption begin && $CTL interruption end && $CTL lock >/dev/null && $CTL unlock >/dev/null \
    && $CTL pressure critical && $CTL jetsam | grep -q "memory-pressure" \
    && pass "tour: interruption, lock, unlock, pressure critical and its kill record" \
    || fail "tour: pressure: $($CTL jetsam 2>&1 | tail -2)"
$CTL activate recorder >/dev/null
# The interface on the real system bus, with the policy the package installed.
BUS=io.lifecycled.Lifecycle1
for i in $(seq 1 3000); do busctl status $BUS >/dev/null 2>&1 && break; sleep 0.01; done
[ -f /usr/share/dbus-1/system.d/$BUS.conf ] && [ -f /usr/share/dbus-1/interfaces/$BUS.xml ] && [ -f /usr/share/polkit-1/actions/$BUS.policy ] \
    && [ "$(busctl get-property $BUS /io/lifecycled/Lifecycle1/app/recorder $BUS.App State 2>&1)" = 's "active"' ] \
    && pass "D-Bus: the package's policy and interface installed; busctl reads the recorder: active" \
    || fail "D-Bus: $(busctl get-property $BUS /io/lifecycled/Lifecycle1/app/recorder $BUS.App State 2>&1); $(journalctl -u lifecycled -o cat | grep -i bus | tail -2)"
# polkit decides for others: the system's polkitd (bus-activated), the package's actions.
out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups gdbus call --system -d $BUS \
    -o /io/lifecycled/Lifecycle1/app/saver -m $BUS.App.Stop '{}' 2>&1)
echo "$out" | grep -q "InteractiveAuthorizationRequired" \
    && pass "D-Bus: nobody's Stop goes to polkit, which would ask for a password: InteractiveAuthorizationRequired" \
    || fail "D-Bus as nobody: $out"

# An app's output in the journal, and reload after a manifest is added.
cat > /etc/lifecycled/apps/talker.toml <<'TOML'
command = ["sh", "-c", "echo talker-says-hello; exec sleep 100000"]
delivery = "signals"
user = "nobody"
autostart = "background"
TOML
$CTL reload | grep -q "^added: talker" && pass "supervisorctl reload: talker added" || fail "reload: $($CTL reload 2>&1)"
journal_has talker talker-says-hello && pass "its output: journalctl -t talker" \
    || fail "journalctl -t talker: $(journalctl -t talker -o cat --no-pager | head -3)"
sed 's/talker-says-hello/second-says-hello/' /etc/lifecycled/apps/talker.toml > /etc/lifecycled/apps/second.toml
systemctl reload lifecycled && $CTL status second >/dev/null && journal_has second second-says-hello \
    && pass "systemctl reload: second added, its output in the journal" || fail "systemctl reload: $($CTL avail 2>&1)"

# An operator's change to the configuration, then the upgrade with apps running.
echo "# changed by the operator" >> /etc/lifecycled/lifecycled.toml
BEFORE=$(apps)
EVENTS=$(wc -l < /tmp/lifecycled-recorder.events)
M0=$(systemctl show -p MainPID --value lifecycled.service)
echo "apps before the upgrade: $(echo "$BEFORE" | tr '\n' ';')"
dpkg -i --force-confold /opt/debs/upgrade.deb > /tmp/dpkg-upgrade.log 2>&1 \
    && pass "dpkg -i: upgraded to $(dpkg-query -W -f='${Version}' lifecycled)" || fail "upgrade: $(tail -5 /tmp/dpkg-upgrade.log)"
M1=$(systemctl show -p MainPID --value lifecycled.service)
[ "$M1" != "$M0" ] && [ "$(systemctl is-active lifecycled.service)" = active ] \
    && pass "the upgrade restarted the daemon (pid $M0 -> $M1)" || fail "daemon after the upgrade: $M0 -> $M1"
AFTER=$(apps)
# Same processes; states may have moved on meanwhile as they would anyway
# (the worker's task ends, a plain program's grace runs out).
[ "$(echo "$AFTER" | cut -d' ' -f1,3)" = "$(echo "$BEFORE" | cut -d' ' -f1,3)" ] \
    && echo "$AFTER" | grep -q "^recorder active " \
    && pass "every app runs on with the same pid, the recorder still active" \
    || fail "apps after the upgrade: $(echo "$AFTER" | tr '\n' ';')"
[ "$(wc -l < /tmp/lifecycled-recorder.events)" = "$EVENTS" ] && pass "the recorder was told nothing: it did not notice" \
    || fail "the recorder noticed: $(tail -3 /tmp/lifecycled-recorder.events | tr '\n' ' ')"
grep -q "changed by the operator" /etc/lifecycled/lifecycled.toml && pass "the changed configuration was kept" \
    || fail "the operator's change is gone"
$CTL home >/dev/null && $CTL activate recorder >/dev/null && [ "$(tail -1 /tmp/lifecycled-recorder.events)" = didBecomeActive ] \
    && pass "after the upgrade: the recorder goes to the background and comes back" \
    || fail "after the upgrade: $(tail -3 /tmp/lifecycled-recorder.events | tr '\n' ' ')"

# Removal stops the service, and with it every app.
PIDS=$(apps | cut -d' ' -f3)
dpkg -r lifecycled > /tmp/dpkg-remove.log 2>&1 || fail "dpkg -r: $(tail -3 /tmp/dpkg-remove.log)"
left=""
for p in $PIDS; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
[ -z "$left" ] && [ ! -e /usr/bin/lifecycled ] && pass "dpkg -r: the service stopped, every app ended, the binaries gone" \
    || fail "dpkg -r: still alive:$left"
echo "$fails failure(s)"
[ "$fails" = 0 ]
