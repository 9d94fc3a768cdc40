/* The one piece of process-wide state a signal handler needs: the signal that asked servesim
 * to stop. Written only by the handler, read by the run loops (io/interrupt.h). */
#include "io/interrupt.h"

#include <string.h>

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

void interrupt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second signal takes the default action: the process ends */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

const volatile sig_atomic_t *interrupt_flag(void) { return &stop_signal; }
