/* `servesim bench --serving PRESET`: the engine's serving loop against the calibration probe,
 * timed in pairs on the CPU backend. */
#ifndef SERVESIM_CLI_BENCH_SERVING_H
#define SERVESIM_CLI_BENCH_SERVING_H

int bench_serving(const char *preset, int threads);

#endif
