# The two commands of the README:
#   make run    installs what is missing, builds, runs lifecycled on config/
#   make test   installs what is missing, builds, runs every test
SWIFT ?= swift
CONFIG ?= config/lifecycled.toml
PREFIX ?= /usr/local
SHIM_TEST := .build/test_shim

.PHONY: deps build release run test test-shim bench install clean

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# The daemon on the default config with the example apps; Ctrl-C stops it
# (and every app, as LIFECYCLE.md says). Needs root for cgroups.
run: release
	.build/release/lifecycled --config $(CONFIG)

test: deps test-shim
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

test-shim:
	@mkdir -p .build
	gcc -Wall -Wextra -Werror -ISources/CLifecycleShim/include Tests/shim/test_shim.c Sources/CLifecycleShim/shim.c -o $(SHIM_TEST)
	$(SHIM_TEST)

bench: release
	.build/release/lifecycled-bench

install: release
	install -m 755 .build/release/lifecycled .build/release/supervisorctl $(PREFIX)/bin/
	install -m 755 .build/release/example-recorder .build/release/example-saver \
	    .build/release/example-worker .build/release/example-plain $(PREFIX)/bin/
	install -d /etc/lifecycled/apps
	[ -e /etc/lifecycled/lifecycled.toml ] || install -m 644 config/lifecycled.toml /etc/lifecycled/
	install -m 644 systemd/lifecycled.service systemd/lifecycled.socket /etc/systemd/system/

clean:
	rm -rf .build
