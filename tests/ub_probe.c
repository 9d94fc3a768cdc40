/* One undefined operation, a signed overflow, for the sanitized build's own test: built with
 * -fsanitize=undefined -fno-sanitize-recover=undefined it must stop with a report, so that no
 * undefined behaviour anywhere in the tests can be reported and run past (it once was: link-time
 * code generation dropped -fno-sanitize-recover). */
#include <limits.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argv;
    volatile int big = INT_MAX;
    int past = big + argc; /* argc >= 1: overflows */
    printf("ran past the overflow: %d\n", past);
    return 0;
}
