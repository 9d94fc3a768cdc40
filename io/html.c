/* report.html from report.md: cmark-gfm renders the Markdown (its table extension for the
 * tables every report is made of), the PNGs are inlined as base64 data URIs, the scenario
 * file follows, and a few lines of CSS and script make it readable and checkable. */
#include "io/html.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include "io/errmsg.h"

/* The whole of PATH, NUL-terminated, with its length in *LEN; NULL when it cannot be read. */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            char *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got < 65536) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static void base64(FILE *out, const unsigned char *p, size_t n)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        fputc(digits[v >> 18], out);
        fputc(digits[(v >> 12) & 63], out);
        fputc(digits[(v >> 6) & 63], out);
        fputc(digits[v & 63], out);
    }
    if (i < n) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0);
        fputc(digits[v >> 18], out);
        fputc(digits[(v >> 12) & 63], out);
        fputc(i + 1 < n ? digits[(v >> 6) & 63] : '=', out);
        fputc('=', out);
    }
}

void html_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* HTML with each <img src="NAME.png"> whose NAME is a plain file name in DIR inlined. */
static void inline_images(FILE *out, const char *html, const char *dir)
{
    static const char tag[] = "<img src=\"";
    const char *p = html;
    for (const char *hit; (hit = strstr(p, tag)); ) {
        const char *src = hit + sizeof tag - 1, *end = strchr(src, '"');
        if (!end) break;
        fwrite(p, 1, (size_t)(src - p), out);
        size_t n = (size_t)(end - src);
        char name[256], path[4400];
        unsigned char *png = NULL;
        size_t len = 0;
        if (n < sizeof name && n > 4) {
            memcpy(name, src, n);
            name[n] = 0;
            if (!strpbrk(name, "/:\\%&") && strcmp(name + n - 4, ".png") == 0) {
                snprintf(path, sizeof path, "%s/%s", dir, name);
                png = (unsigned char *)read_all(path, &len);
            }
        }
        if (png && len > 8 && memcmp(png, "\x89PNG", 4) == 0) {
            fputs("data:image/png;base64,", out);
            base64(out, png, len);
        } else {
            fwrite(src, 1, n, out);
        }
        free(png);
        p = end;
    }
    fputs(p, out);
}

static const char page_style[] =
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.45}"
    "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}"
    "th,td{border:1px solid #ccc;padding:0.25em 0.6em}th{background:#f3f3f3}"
    "img{max-width:100%;border:1px solid #eee}pre{background:#f6f6f6;padding:0.8em;overflow-x:auto}"
    "img[data-rendered='0x0']{outline:3px solid #c00}";

/* Marks each image with the size it rendered at, once the page has loaded. */
static const char page_script[] =
    "window.addEventListener('load',function(){for(var i=0;i<document.images.length;i++){var m=document.images[i];"
    "m.setAttribute('data-rendered',m.naturalWidth+'x'+m.naturalHeight);}});";

int html_write_report(const char *dir, const char *title, const char *scenario_path, char *err, size_t errlen)
{
    char md_path[4400], path[4400], tmp[4500];
    snprintf(md_path, sizeof md_path, "%s/report.md", dir);
    snprintf(path, sizeof path, "%s/report.html", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    size_t md_len = 0;
    char *md = read_all(md_path, &md_len);
    if (!md) return errmsg(err, errlen, "%s: cannot read (%s)", md_path, strerror(errno ? errno : EIO));
    cmark_gfm_core_extensions_ensure_registered();
    cmark_parser *parser = cmark_parser_new(CMARK_OPT_DEFAULT);
    cmark_syntax_extension *table = cmark_find_syntax_extension("table");
    char *html = NULL;
    if (parser && table && cmark_parser_attach_syntax_extension(parser, table)) {
        cmark_parser_feed(parser, md, md_len);
        cmark_node *doc = cmark_parser_finish(parser);
        if (doc) html = cmark_render_html(doc, CMARK_OPT_DEFAULT, cmark_parser_get_syntax_extensions(parser));
        cmark_node_free(doc);
    }
    if (parser) cmark_parser_free(parser);
    free(md);
    if (!html) return errmsg(err, errlen, "%s: cmark-gfm could not render it (out of memory?)", md_path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(html);
        return errmsg(err, errlen, "%s: cannot create (%s)", tmp, strerror(errno));
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    html_escape(f, title);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n", page_style);
    inline_images(f, html, dir);
    free(html);
    fputs("<h2>Scenario</h2>\n", f);
    size_t sc_len = 0;
    char *sc = scenario_path && *scenario_path ? read_all(scenario_path, &sc_len) : NULL;
    if (sc) {
        fputs("<p><code>", f);
        html_escape(f, scenario_path);
        fputs("</code>, as it was when the report was made:</p>\n<pre>", f);
        html_escape(f, sc);
        fputs("</pre>\n", f);
        free(sc);
    } else {
        fputs("<p>The built-in scenario (<code>servesim keys</code> lists its values), with the settings the command "
              "above names.</p>\n", f);
    }
    fprintf(f, "<script>%s</script>\n</body>\n</html>\n", page_script);
    if (fclose(f) != 0) {
        remove(tmp);
        return errmsg(err, errlen, "%s: write error", tmp);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return errmsg(err, errlen, "%s: cannot rename into place (%s)", path, strerror(errno));
    }
    return 0;
}
