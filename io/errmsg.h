/* The one way a module reports a failure: "what: why" formatted into the caller's buffer. */
#ifndef SERVESIM_IO_ERRMSG_H
#define SERVESIM_IO_ERRMSG_H

#include <stdarg.h>
#include <stddef.h>

/* Formats into ERR[0..errlen) and returns -1, so that `return errmsg(...)` fails a call. */
__attribute__((format(printf, 3, 4))) int errmsg(char *err, size_t errlen, const char *fmt, ...);
int verrmsg(char *err, size_t errlen, const char *fmt, va_list ap);

#endif
