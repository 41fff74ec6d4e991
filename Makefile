# The two commands of the README:
#   make run    installs what is missing, builds, runs lifecycled on config/
#   make test   installs what is missing, builds, runs every test
SWIFT ?= swift
CONFIG ?= config/lifecycled.toml
PREFIX ?= /usr/local
SHIM_TEST := .build/test_shim

.PHONY: deps build release run test test-vm chaos test-shim bench bench-wakeups bench-scenes install generated deb test-deb clean bench-output bench-status clib test-clib install-clib fuzz bench-memory bench-restarts bench-durable bench-hostile bench-dbus bench-focus bench-counted bench-launches bench-prewarm format

# The C client library (clib/, docs/c-library.md): C11, no Swift needed.
CC := gcc
CLIB := .build/clib
CLIB_CFLAGS := -std=c11 -Wall -Wextra -Wswitch-enum -Werror -pedantic -O2 -g
CLIB_HDR := clib/include/lifecycle.h clib/src/wire.h
CLIB_VERSION := 1.2.0
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

# Linked with the Swift runtime and FoundationEssentials inside (--static-swift-stdlib):
# the binaries run on a machine without the toolchain (make install, make deb).
# scripts/check-binaries.sh (part of `test`) holds the daemon to no full Foundation.
release: deps
	$(SWIFT) build -c release --static-swift-stdlib

# The daemon on the default config with the example apps; Ctrl-C stops it
# (and every app, as docs/lifecycle.md says). Needs root for cgroups.
# The example apps run as nobody, and a checkout may sit where nobody cannot
# enter (/root is 0700 on Debian): what they run is staged, in the
# checkout's own layout, in RUN_DIR (root's to write, everyone's to read).
RUN_DIR ?= /run/lifecycled-examples
run: release clib
	cp $(CLIB)/c-recorder .build/release/example-c-recorder
	rm -rf $(RUN_DIR)
	install -d -m 0755 $(RUN_DIR)/.build/release $(RUN_DIR)/.build/clib $(RUN_DIR)/Examples
	find .build/release/ -maxdepth 1 -type f -perm -u+x \( -name 'example-*' -o -name lifecycled \
		-o -name supervisorctl \) -exec cp {} $(RUN_DIR)/.build/release/ \;
	cp -P $(CLIB)/liblifecycle.so* $(RUN_DIR)/.build/clib/
	cp -r Examples/python-recorder $(RUN_DIR)/Examples/
	cp -r config $(RUN_DIR)/
	chmod -R a+rX,go-w $(RUN_DIR)
	$(RUN_DIR)/.build/release/lifecycled --config $(if $(filter /%,$(CONFIG)),$(CONFIG),$(RUN_DIR)/$(CONFIG))

# The C library first: the lifecycle tests run against its recorder too.
# Then a short fuzz of the parsers (make fuzz FUZZ_SECONDS=600 for a long one).
test: deps test-shim test-clib
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	Tests/vm/run.sh
	Tests/systemd/nspawn.sh
	scripts/fuzz.sh $(FUZZ_SECONDS)
	$(MAKE) test-deb
	scripts/check-binaries.sh .build/release
	scripts/check-leaks.py .build/release

# Pure cgroup v2 with the memory and cpu controllers, in a virtual machine
# booted from this machine's own root (Tests/vm/run.sh, scripts/vm.sh): real
# memory running out, the kernel's OOM kills, swap. Part of `test`.
# make test-vm FILTER=theKernelKillsAtTheAppsOwnLimit runs one test there.
test-vm: deps
	$(SWIFT) build --build-tests
	Tests/vm/run.sh $(FILTER)

# Under a real systemd (systemd-nspawn from the host's root), in the hybrid
# layout and pure cgroup v2: apps outlive kill -9, SIGSEGV, restart, the
# watchdog and daemon-reexec; a stop ends them. Needs root. Part of `test`.
test-systemd: deps
	$(SWIFT) build
	Tests/systemd/nspawn.sh

# The real daemon under seeded chaos (Tests/EndToEndTests/ChaosTests.swift):
# `make test` walks 150 steps; this walks CHAOS_STEPS (about 10 s per 100).
# CHAOS_SEED=N replays a walk (its seed is printed).
CHAOS_STEPS ?= 4000
chaos: deps
	$(SWIFT) build --build-tests
	CHAOS_STEPS=$(CHAOS_STEPS) $(SWIFT) test --skip-build --filter ChaosTests

FUZZ_SECONDS ?= 15
fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS)

# swift-format (in the toolchain) with the checked-in .swift-format: 120 columns.
SWIFT_SOURCES := Sources Tests Benchmarks Examples Fuzz Package.swift
format:
	swift-format format -i -r $(SWIFT_SOURCES)
	@swift-format lint -r $(SWIFT_SOURCES) 2>&1 | grep -v LineLength || true

test-shim:
	@mkdir -p .build
	gcc -Wall -Wextra -Werror -ISources/CLifecycleShim/include Tests/shim/test_shim.c Sources/CLifecycleShim/shim.c -o $(SHIM_TEST)
	$(SHIM_TEST)

bench: release clib
	.build/release/lifecycled-bench

# Pushes to suspended and not-running apps against an event round trip and a
# launch, and fetch wake-ups per hour batched against one timer per app, on the
# core with a manual clock and on the real daemon at 60x speed (issue 14).
bench-wakeups: release clib
	.build/release/lifecycled-bench --wakeups

# Activate on one display while another display's app stays active, and a
# scene app switching scenes, against today's activate: docs/performance.md.
bench-scenes: release
	.build/release/lifecycled-bench --scenes

# Reaction to memory running out, side by side with earlyoom (installed if
# missing), with a 1 GiB and a 256 MiB victim: docs/performance.md.
# Benchmarks/memory/reaction.py --quick for 5 runs instead of 20.
# kill -9 and daemon-reexec blackouts with 10, 100 and 1,000 apps.
bench-restarts: release clib
	.build/release/lifecycled-bench --restarts

# A burst of commands and of launches (issue 27: nothing leaves before it is saved).
bench-durable: release clib
	.build/release/lifecycled-bench --durable

# The kill -9 blackout under a real systemd (systemd-nspawn, both layouts).
bench-systemd: release clib
	BIN=.build/release INSIDE=Benchmarks/systemd/blackout.sh Tests/systemd/nspawn.sh

# Hostile neighbours (issue 12): a root command under a flood from nobody,
# 1,000 connections, a freeze, 10,000 stranger notifications.
bench-hostile: release clib
	/usr/bin/python3 Benchmarks/hostile/load.py

# The compositor drives the lifecycle (issue 30): headless sway, the follower,
# focus and workspace switches to active and thawed; docs/performance.md.
bench-focus: release
	/usr/bin/python3 Benchmarks/focus/bench.py

# The D-Bus interface against the JSON socket (issue 29): docs/performance.md.
# BEFORE=DIR (a release lifecycled from before the interface): the socket side by side with it.
bench-dbus: release clib
	/usr/bin/python3 Benchmarks/dbus/bench.py

# Launch to active with 10, 100 and 1,000 apps running, over a bare exec, and
# the burst of background launches before it (issue 31): docs/performance.md.
bench-launches: release clib
	.build/release/lifecycled-bench --launches

# A prewarmed app's activation against a cold launch of the same binary,
# Swift, C and Python clients (issue 31): docs/performance.md.
bench-prewarm: release clib
	.build/release/lifecycled-bench --prewarm

# The daemon's instructions per event, freeze and thaw, launch, background
# launch to frozen, status of 1,000 apps and a prewarmed activation, counted
# by callgrind, each build in BUILDS (issue 31): docs/performance.md.
bench-counted: release clib
	/usr/bin/python3 Benchmarks/counted/bench.py

# An app writing as fast as it can, against another app's event round trip
# (issue 13): docs/performance.md.
bench-output: release clib
	/usr/bin/python3 Benchmarks/output/flood.py

# `status` of 1,000 apps, this build against another side by side (issue 13):
# make bench-status OLD=/dir/with/an/older/lifecycled/and/supervisorctl
bench-status: release
	@[ -n "$(OLD)" ] || { echo "make bench-status OLD=DIR: DIR holds the lifecycled and supervisorctl to compare with"; exit 2; }
	/usr/bin/python3 Benchmarks/status/compare.py $(OLD)

bench-memory: release
	python3 Benchmarks/memory/reaction.py --out bench-results/memory.md
	python3 Benchmarks/memory/reaction.py --victim-mb 256 --overshoot-mb 64 --out bench-results/memory-256.md

# Memory pressure side by side in a 1 GiB, 2-CPU guest (scripts/vm.sh; systemd
# as PID 1 for systemd-oomd): the kernel's OOM killer, earlyoom, systemd-oomd
# (distribution defaults and tuned), lifecycled (with and without reclaim, and
# the build before this work: BEFORE=DIR, default /work/before/.build/release),
# both workloads, no swap / swap / zswap, 3 runs each; then the cpu workload
# (fg latency with 4 busy background apps: cpu.weight on, off, before).
# bench-results/memory-vm/summary.md; results and what they mean in
# docs/performance.md ("Pure cgroup v2"). About 2 hours under TCG on an idle
# host (it waits while a Swift build or another guest runs); earlyoom and
# systemd-oomd are installed with apt-get when missing. See the header of
# Benchmarks/memory-vm/run.py (MEMORY_VM_ARGS=--quick, --arms, --configs, --runs, --workloads).
.PHONY: bench-memory-vm
bench-memory-vm: release
	/usr/bin/python3 Benchmarks/memory-vm/run.py $(if $(BEFORE),--before $(BEFORE)) $(MEMORY_VM_ARGS)

# Everything under $(DESTDIR)$(PREFIX) (and the units and config under
# $(DESTDIR)/etc): binaries (stripped; they need no Swift toolchain), the C
# library, shell completions for bash, zsh and fish and man pages, both
# generated from the command tree, the units and the example configuration
# (files already there are kept).
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
UNITDIR ?= /etc/systemd/system
GEN := .build/generated
EXAMPLE_APPS := recorder saver worker plain c-recorder

# Completion scripts and man pages (swift-argument-parser's generators). The
# manual plugin builds the tools itself: in debug, so that the static
# release binaries are not relinked.
generated: release
	@mkdir -p $(GEN)/completions $(GEN)/man
	for tool in supervisorctl lifecycled; do \
	    .build/release/$$tool --generate-completion-script bash > $(GEN)/completions/$$tool.bash && \
	    .build/release/$$tool --generate-completion-script zsh > $(GEN)/completions/_$$tool && \
	    .build/release/$$tool --generate-completion-script fish > $(GEN)/completions/$$tool.fish || exit 1; \
	done
	$(SWIFT) package generate-manual --multi-page --configuration debug --date 2026-11-23 \
	    --authors "lifecycled developers" >/dev/null
	cp .build/plugins/GenerateManual/outputs/supervisorctl/*.1 .build/plugins/GenerateManual/outputs/lifecycled/*.1 $(GEN)/man/
	rm -f $(GEN)/man/*.help.1

install: release install-clib generated
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR) \
	    $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)/etc/lifecycled/apps
	install -s -m 755 .build/release/lifecycled .build/release/supervisorctl .build/release/lifecycled-follow \
	    $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/user
	sed -e 's|/usr/local/bin/|$(PREFIX)/bin/|g' -e 's|/usr/local/share/|$(PREFIX)/share/|g' systemd/lifecycled-follow.service \
	    > $(DESTDIR)$(PREFIX)/lib/systemd/user/lifecycled-follow.service
	install -s -m 755 .build/release/example-recorder .build/release/example-saver .build/release/example-news \
	    .build/release/example-worker .build/release/example-plain $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(CLIB)/c-recorder $(DESTDIR)$(PREFIX)/bin/example-c-recorder
	install -m 644 $(GEN)/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	for tool in supervisorctl lifecycled; do \
	    install -m 644 $(GEN)/completions/$$tool.bash $(DESTDIR)$(BASHCOMPDIR)/$$tool && \
	    install -m 644 $(GEN)/completions/_$$tool $(DESTDIR)$(ZSHCOMPDIR)/ && \
	    install -m 644 $(GEN)/completions/$$tool.fish $(DESTDIR)$(FISHCOMPDIR)/ || exit 1; \
	done
	[ -e $(DESTDIR)/etc/lifecycled/lifecycled.toml ] || install -m 644 config/lifecycled.toml $(DESTDIR)/etc/lifecycled/
	for app in $(EXAMPLE_APPS); do \
	    [ -e $(DESTDIR)/etc/lifecycled/apps/$$app.toml ] || install -m 644 config/apps/$$app.toml $(DESTDIR)/etc/lifecycled/apps/; \
	done
	install -d $(DESTDIR)$(PREFIX)/share/dbus-1/system.d $(DESTDIR)$(PREFIX)/share/dbus-1/interfaces
	install -m 644 dbus/io.lifecycled.Lifecycle1.conf $(DESTDIR)$(PREFIX)/share/dbus-1/system.d/
	install -m 644 docs/io.lifecycled.Lifecycle1.xml $(DESTDIR)$(PREFIX)/share/dbus-1/interfaces/
	install -d $(DESTDIR)$(PREFIX)/share/polkit-1/actions
	install -m 644 dbus/io.lifecycled.Lifecycle1.policy $(DESTDIR)$(PREFIX)/share/polkit-1/actions/
	for unit in lifecycled.service lifecycled.socket; do \
	    sed -e 's|/usr/local/bin/|$(PREFIX)/bin/|g' -e 's|/usr/local/share/|$(PREFIX)/share/|g' systemd/$$unit \
	        > $(DESTDIR)$(UNITDIR)/$$unit && chmod 644 $(DESTDIR)$(UNITDIR)/$$unit; \
	done

# A Debian package (dpkg-deb): /usr, units in /lib/systemd/system, the
# configuration in /etc/lifecycled as conffiles (a changed one is kept on
# upgrade), maintainer scripts that enable and start the socket and service
# on a first install and restart the daemon (keeping every app) on an upgrade.
VERSION ?= 0.16.0
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_STAGE := .build/deb/stage-$(VERSION)
DEB := .build/deb/lifecycled_$(VERSION)_$(DEB_ARCH).deb
deb: release clib generated
	rm -rf $(DEB_STAGE)
	$(MAKE) -s install DESTDIR=$(CURDIR)/$(DEB_STAGE) PREFIX=/usr UNITDIR=/lib/systemd/system
	install -d $(DEB_STAGE)/DEBIAN $(DEB_STAGE)/usr/share/doc/lifecycled
	install -m 644 README.md docs/*.md $(DEB_STAGE)/usr/share/doc/lifecycled/
	install -m 755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm $(DEB_STAGE)/DEBIAN/
	cd $(DEB_STAGE) && find etc -type f | sed 's|^|/|' | sort > DEBIAN/conffiles
	depends=$$(packaging/debian/depends.sh $(DEB_STAGE)) && \
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@ARCH@|$(DEB_ARCH)|' -e "s|@DEPENDS@|$$depends|" \
	    -e "s|@SIZE@|$$(du -sk --exclude=DEBIAN $(DEB_STAGE) | cut -f1)|" packaging/debian/control.in > $(DEB_STAGE)/DEBIAN/control
	dpkg-deb --root-owner-group -Zxz --build $(DEB_STAGE) $(DEB) >/dev/null
	@echo "built $(DEB) ($$(du -h $(DEB) | cut -f1))"

# The package under a real systemd: installed into systemd-nspawn, the
# README's tour, an upgrade with apps running (Tests/systemd/deb.sh).
test-deb: deb
	$(MAKE) -s deb VERSION=$(VERSION)+1
	Tests/systemd/deb.sh .build/deb/lifecycled_$(VERSION)_$(DEB_ARCH).deb .build/deb/lifecycled_$(VERSION)+1_$(DEB_ARCH).deb

clean:
	rm -rf .build

# liblifecycle.so (soname liblifecycle.so.1, only lifecycle_* exported),
# liblifecycle.a, and the C recorder (linked statically: it needs nothing
# at run time but libc).
clib: $(CLIB)/liblifecycle.so $(CLIB)/liblifecycle.a $(CLIB)/c-recorder

$(CLIB)/pic/%.o: clib/src/%.c $(CLIB_HDR)
	@mkdir -p $(CLIB)/pic
	$(CC) $(CLIB_CFLAGS) -fPIC -fvisibility=hidden -Iclib/include -c $< -o $@

$(CLIB)/static/%.o: clib/src/%.c $(CLIB_HDR)
	@mkdir -p $(CLIB)/static
	$(CC) $(CLIB_CFLAGS) -fvisibility=hidden -Iclib/include -c $< -o $@

$(CLIB)/liblifecycle.so: $(CLIB)/pic/lifecycle.o $(CLIB)/pic/wire.o
	$(CC) -shared -Wl,-soname,liblifecycle.so.1 -Wl,-z,defs -o $@ $^
	ln -sf liblifecycle.so $(CLIB)/liblifecycle.so.1

$(CLIB)/liblifecycle.a: $(CLIB)/static/lifecycle.o $(CLIB)/static/wire.o
	rm -f $@
	ar rcs $@ $^

$(CLIB)/c-recorder: Examples/c-recorder/recorder.c clib/include/lifecycle.h $(CLIB)/liblifecycle.a
	$(CC) $(CLIB_CFLAGS) -Iclib/include $< $(CLIB)/liblifecycle.a -o $@

# The C tests (real socket pairs, the shared golden vectors), and a check
# that the shared library exports the public API and nothing else.
test-clib: clib
	$(CC) $(CLIB_CFLAGS) -Iclib/include -Iclib/src clib/tests/test_lifecycle.c $(CLIB)/liblifecycle.a -o $(CLIB)/test_lifecycle
	$(CLIB)/test_lifecycle Tests/golden/vectors.txt
	@extra=$$(nm -D --defined-only $(CLIB)/liblifecycle.so | awk '{print $$3}' | grep -v '^lifecycle_[a-z]' ; \
	          nm -D --defined-only $(CLIB)/liblifecycle.so | awk '{print $$3}' | grep '^lifecycle__'); \
	if [ -n "$$extra" ]; then echo "FAILED  liblifecycle.so exports more than the API: $$extra"; exit 1; fi; \
	echo "ok      liblifecycle.so exports only lifecycle_* ($$(nm -D --defined-only $(CLIB)/liblifecycle.so | wc -l) symbols)"
	@# Installed as a user gets it: a staged install, then an app built with pkg-config alone.
	@rm -rf $(CLIB)/stage
	@$(MAKE) -s install-clib DESTDIR=$(CURDIR)/$(CLIB)/stage PREFIX=/usr/local >/dev/null
	@PKG_CONFIG_PATH=$(CURDIR)/$(CLIB)/stage/usr/local/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$(CURDIR)/$(CLIB)/stage \
	    $(CC) Examples/c-recorder/recorder.c $$(PKG_CONFIG_PATH=$(CURDIR)/$(CLIB)/stage/usr/local/lib/pkgconfig \
	    PKG_CONFIG_SYSROOT_DIR=$(CURDIR)/$(CLIB)/stage pkg-config --cflags --libs lifecycle) -o $(CLIB)/stage/recorder
	@LD_LIBRARY_PATH=$(CURDIR)/$(CLIB)/stage/usr/local/lib ldd $(CLIB)/stage/recorder | grep -q 'liblifecycle.so.1 => $(CURDIR)/$(CLIB)/stage' \
	    && echo "ok      installed with pkg-config: an app builds and links against liblifecycle.so.1" \
	    || { echo "FAILED  an app built with pkg-config does not link against the installed library"; exit 1; }

# The header, both libraries and lifecycle.pc under $(PREFIX) (DESTDIR for
# staging). Part of `install`; alone it builds no Swift.
install-clib: clib
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 644 clib/include/lifecycle.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 755 $(CLIB)/liblifecycle.so $(DESTDIR)$(LIBDIR)/liblifecycle.so.$(CLIB_VERSION)
	ln -sf liblifecycle.so.$(CLIB_VERSION) $(DESTDIR)$(LIBDIR)/liblifecycle.so.1
	ln -sf liblifecycle.so.1 $(DESTDIR)$(LIBDIR)/liblifecycle.so
	install -m 644 $(CLIB)/liblifecycle.a $(DESTDIR)$(LIBDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	    -e 's|@VERSION@|$(CLIB_VERSION)|g' clib/lifecycle.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/lifecycle.pc
	-[ -n "$(DESTDIR)" ] || ldconfig
