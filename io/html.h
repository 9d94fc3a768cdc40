/* report.html: an experiment's report.md as one self-contained HTML page that opens offline
 * and travels as one file: tables and text rendered by cmark-gfm, every PNG the report shows
 * embedded as a data URI, and the scenario file appended. */
#ifndef SERVESIM_IO_HTML_H
#define SERVESIM_IO_HTML_H

#include <stddef.h>
#include <stdio.h>

/* Writes DIR/report.html from DIR/report.md (through a temporary file renamed into place),
 * titled TITLE, with the text of SCENARIO_PATH ("" or NULL: a built-in scenario) at the end.
 * An image the report names that is not a PNG in DIR stays a link; the page marks each image
 * with the size it rendered at (data-rendered="WxH", 0x0 when it did not load), which is what
 * tests read back from a browser. -1 with the reason in ERR. */
int html_write_report(const char *dir, const char *title, const char *scenario_path, char *err, size_t errlen);
/* S with &, <, >, " and ' escaped for HTML text and attribute values. */
void html_escape(FILE *f, const char *s);

#endif
