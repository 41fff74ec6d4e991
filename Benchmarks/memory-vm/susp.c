/*
 * susp: a suspended app of Benchmarks/memory-vm.
 *
 *   susp [--mb 96] [--ready-file PATH]
 *
 * Writes MB MiB of ~50 %-compressible, non-zero, non-repeating data (see
 * fill_page in common.h: no page alike, none same-filled, so zswap's
 * same-filled shortcut flatters nobody), then says READY=1 on
 * $NOTIFY_SOCKET (if set: lifecycled's readiness = "notify") and creates
 * the ready file (if asked), and sleeps until killed. It is frozen from
 * outside (cgroup.freeze, by lifecycled or the harness). It handles no
 * signal: any fatal one (SIGTERM from earlyoom too) kills it even while
 * frozen.
 */
#include "common.h"

int main(int argc, char **argv)
{
    const char *ready = NULL;
    unsigned long mb = 96;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "susp: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--mb")) mb = arg_ulong("susp", a, v);
        else if (!strcmp(a, "--ready-file")) ready = v;
        else {
            fprintf(stderr, "susp: unknown option %s\n", a);
            return 2;
        }
    }
    if (mb == 0) {
        fprintf(stderr, "usage: susp [--mb 96] [--ready-file PATH]\n");
        return 2;
    }
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    char *mem = filled_region("susp", mb);
    if (mem == NULL)
        return 1;
    sd_notify_msg("READY=1");
    if (ready != NULL && write_file_atomic(ready, "ready\n") != 0) {
        fprintf(stderr, "susp: ready file %s: %s\n", ready, strerror(errno));
        return 1;
    }
    for (;;)
        pause();
}
