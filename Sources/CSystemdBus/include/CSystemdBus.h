#ifndef C_SYSTEMD_BUS_H
#define C_SYSTEMD_BUS_H
// The few systemd D-Bus calls the daemon makes, in C because sd-bus's
// message builders are variadic. Each call opens the system bus, does its
// work and closes it again: the daemon holds no bus connection between
// calls, so nothing queues unread on it. Every function returns 0 or a
// negative errno; on failure *error, when not NULL, gets a message the
// caller frees (the bus error's text, or strerror).
#include <stdint.h>
#include <sys/types.h>

/// The unit the calling process belongs to ("lifecycled.service") and its
/// slice ("system.slice", or NULL), from its cgroup (sd_pid_get_unit(3));
/// the caller frees both.
int lc_own_unit(char **unit, char **slice);

/// A loaded unit's ActiveState ("active", "inactive", "failed", ...) and,
/// for a scope, its ControlGroup ("/system.slice/x.scope"); -ENOENT when
/// systemd has no such unit loaded. The caller frees both strings.
int lc_unit_state(const char *unit, char **active_state, char **control_group, char **error);

/// Starts a transient scope around `pid` with Delegate=yes,
/// PartOf=`service` and Before=`service`, in `slice` (NULL: systemd's
/// default), and waits (up to timeout_usec) for its start job to finish.
/// -EEXIST when the unit is already loaded.
int lc_scope_start(const char *scope, pid_t pid, const char *service, const char *slice,
                   const char *description, uint64_t timeout_usec, char **error);

/// The type of the job now queued or running on `unit` ("restart", "stop",
/// ...); *type is NULL when there is none. The caller frees *type.
int lc_unit_job_type(const char *unit, char **type, char **error);

// The daemon's own D-Bus interface (io.lifecycled.Lifecycle1), served on
// one connection it keeps: BusFront.h.
#include "BusFront.h"

#endif
