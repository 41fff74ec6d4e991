/* liblifecycle's hooks for its own tests (clib/tests), hidden in
 * liblifecycle.so like wire.h's symbols. Not part of the API. */
#ifndef LIFECYCLE_INTERNAL_H
#define LIFECYCLE_INTERNAL_H

#include "lifecycle.h"
#include "wire.h"

/* How long a broken channel is resumed for, in all, instead of
 * LIFECYCLE_RESUME_WAIT_MS: the tests of giving up need not wait 60 s. */
LIFECYCLE_INTERNAL void lifecycle__set_resume_wait(lifecycle_app *app, int milliseconds);

#endif
