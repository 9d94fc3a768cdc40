/* The JSON helpers of json.h. */
#include "io/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence at P (1 to 4 bytes), or 0 when it is not one. */
static int utf8_sequence(const unsigned char *p)
{
    int n = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && p[0] < 0xc2) || (n == 4 && p[0] > 0xf4)) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    /* overlong three- and four-byte forms, surrogates, code points past U+10FFFF */
    if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
        (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

json_t *json_text(const char *s)
{
    size_t len = strlen(s);
    char *utf8 = malloc(2 * len + 1); /* a Latin-1 byte becomes two bytes at most */
    if (!utf8) return NULL;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = utf8_sequence(p);
        if (n == 0) { /* not UTF-8: the byte read as Latin-1, U+0080..U+00FF */
            utf8[o++] = (char)(0xc0 | (*p >> 6));
            utf8[o++] = (char)(0x80 | (*p & 0x3f));
            p++;
        } else {
            memcpy(utf8 + o, p, (size_t)n);
            o += (size_t)n;
            p += n;
        }
    }
    json_t *v = json_stringn(utf8, o);
    free(utf8);
    return v;
}

json_t *json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

int json_put(json_t *obj, const char *key, json_t *value)
{
    return value ? json_object_set_new(obj, key, value) : -1;
}

json_t *json_put_array(json_t *obj, const char *key)
{
    json_t *a = json_array();
    return json_put(obj, key, a) == 0 ? a : NULL;
}

int json_write(FILE *f, const json_t *doc)
{
    if (json_dumpf(doc, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) < 0) return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}
