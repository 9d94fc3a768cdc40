#include "io/errmsg.h"

#include <stdio.h>

int verrmsg(char *err, size_t errlen, const char *fmt, va_list ap)
{
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    return -1;
}

int errmsg(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verrmsg(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}
