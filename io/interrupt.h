/* Ctrl-C and SIGTERM: the first asks the running simulation or engine to stop, so that the
 * command removes its half-written output directory and exits 128 + the signal; a second one
 * ends the process at once. */
#ifndef SERVESIM_IO_INTERRUPT_H
#define SERVESIM_IO_INTERRUPT_H

#include <signal.h>

/* Installs the handlers (main() does, once, before any command). */
void interrupt_install(void);
/* The flag the handler sets: the signal number, 0 until one came. Loops read it through
 * sim_options.stop and engine_options.stop. */
const volatile sig_atomic_t *interrupt_flag(void);

#endif
