/* Numbers a user writes (scenario values, flags, trace and table fields) in decimal notation
 * only: strtod also reads hexadecimal (0x10 as 16, 0x1p4), "inf" and "nan", which no user
 * means in a rate, a length or a time. */
#ifndef SERVESIM_IO_DECIMAL_H
#define SERVESIM_IO_DECIMAL_H

#include <stdbool.h>

/* As strtod(S, END), but only a decimal number is read: [+-] digits [. digits] [e [+-]
 * digits], or [+-] . digits [e ...]; anything else reads nothing (*END == S, 0 returned).
 * errno is ERANGE where strtod would set it; END may be NULL. */
double decimal_strtod(const char *s, char **end);
/* What a message about TEXT, refused as a number, should add where TEXT looks hexadecimal (holds
 * an x), which strtod would have read: " (in decimal digits)" for an INTEGER, else " (in decimal
 * notation, such as 0.5 or 1e3)"; "" for anything else. */
const char *decimal_hint(const char *text, bool integer);

#endif
