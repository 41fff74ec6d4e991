// libsystemd, as the daemon uses it: sd-event (the loop), sd-daemon
// (notify, watchdog, socket activation) and sd-journal (structured logs);
// and sd-bus, as the follower reads logind (LifecycleFollow/SessionLock.swift).
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <systemd/sd-journal.h>
