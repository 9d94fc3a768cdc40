/* Decimal-only strtod (io/decimal.h): finds the extent of a decimal number, then lets strtod
 * convert exactly that prefix, so rounding is the C library's. */
#include "io/decimal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t digits(const char *p)
{
    size_t n = 0;
    while (isdigit((unsigned char)p[n])) n++;
    return n;
}

double decimal_strtod(const char *s, char **end)
{
    char *ignored;
    if (!end) end = &ignored; /* as strtod, END may be NULL */
    const char *num = s;
    while (isspace((unsigned char)*num)) num++; /* as strtod, which callers' messages expect */
    const char *p = num + (*num == '+' || *num == '-');
    size_t whole = digits(p), frac = 0;
    p += whole;
    if (*p == '.') frac = digits(p + 1);
    if (!whole && !frac) {
        *end = (char *)s;
        return 0;
    }
    if (*p == '.') p += 1 + frac;
    if (*p == 'e' || *p == 'E') { /* an exponent only where digits follow, as strtod */
        const char *q = p + 1;
        q += *q == '+' || *q == '-';
        if (digits(q)) p = q + digits(q);
    }
    /* from the sign or first digit: leading white space would count against the buffer */
    size_t len = (size_t)(p - num);
    char buf[128], *stop;
    if (len >= sizeof buf) return strtod(num, end); /* a sign or digit, then decimal: strtod reads as far */
    memcpy(buf, num, len);
    buf[len] = 0;
    double v = strtod(buf, &stop);
    *end = (char *)num + (stop - buf);
    return v;
}

const char *decimal_hint(const char *text, bool integer)
{
    return !strpbrk(text, "xX") ? "" : integer ? " (in decimal digits)" : " (in decimal notation, such as 0.5 or 1e3)";
}
