/* JSON through jansson (Debian's libjansson-dev), for every file servesim writes or reads:
 * the summary, sweeps, validations. Values are built as jansson trees and written in one
 * format; these helpers cover what JSON lacks (NaN, bytes that are not UTF-8). */
#ifndef SERVESIM_IO_JSON_H
#define SERVESIM_IO_JSON_H

#include <stdio.h>

#include <jansson.h>

/* S as a JSON string: UTF-8 kept, each byte that is not part of valid UTF-8 read as Latin-1
 * (a path or a CPU name from anywhere must not make the file invalid). NULL only when out of
 * memory. */
json_t *json_text(const char *s);
/* V as a JSON number, or null when V is not finite (JSON has no NaN or infinity). */
json_t *json_num(double v);
/* OBJ[KEY] = VALUE, taking VALUE's reference; -1 when VALUE is NULL (out of memory). */
int json_put(json_t *obj, const char *key, json_t *value);
/* A new empty array put at OBJ[KEY], owned by OBJ, to be filled; NULL when out of memory. */
json_t *json_put_array(json_t *obj, const char *key);
/* Writes DOC to F as every servesim JSON file is written: objects and arrays indented by two
 * spaces, keys in insertion order, reals with 10 significant digits, a final line end.
 * -1 on a write error. */
int json_write(FILE *f, const json_t *doc);

#endif
