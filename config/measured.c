/* Finding the measured cost table for a GPU, a model shape and a vLLM version. */
#define _DEFAULT_SOURCE /* realpath */
#include "config/measured.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/costtab.h"

static int has_costs(const char *dir)
{
    char p[4200];
    struct stat st;
    int n = snprintf(p, sizeof p, "%s/costs", dir);
    if (n < 0 || (size_t)n >= sizeof p) return 0; /* cut, it would name another folder */
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int set_dir(char *out, size_t len, const char *dir)
{
    size_t n = strlen(dir);
    snprintf(out, len, "%s%s", dir, n && dir[n - 1] == '/' ? "" : "/");
    return 0;
}

int measured_data_dir(char *out, size_t len)
{
    const char *env = getenv("SERVESIM_DATA_DIR");
    if (env && env[0]) return has_costs(env) ? set_dir(out, len, env) : -1;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        /* PREFIX/bin/servesim -> PREFIX/share/servesim first, then build/cli/servesim -> the source folder */
        const char *rel[] = {"/../share/servesim", "/../..", "/.."};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            char cand[4200], real[4096];
            snprintf(cand, sizeof cand, "%s%s", exe, rel[i]);
            if (has_costs(cand) && realpath(cand, real)) return set_dir(out, len, real);
        }
    }
#ifdef SERVESIM_SOURCE_DIR
    if (has_costs(SERVESIM_SOURCE_DIR)) return set_dir(out, len, SERVESIM_SOURCE_DIR);
#endif
    return -1;
}

/* <0, 0, >0 as dotted version A sorts before, with, after B ("0.9.2" < "0.24.0"). */
static int version_cmp(const char *a, const char *b)
{
    for (;;) {
        char *ea, *eb;
        long x = strtol(a, &ea, 10), y = strtol(b, &eb, 10);
        if (x != y) return x < y ? -1 : 1;
        if (*ea != '.' || *eb != '.') return strcmp(ea, eb);
        a = ea + 1;
        b = eb + 1;
    }
}

int measured_table_tp(const cost_table *t)
{
    const char *v = ct_meta(t, "tensor_parallel");
    if (!v) return 1;
    char *end;
    long tp = strtol(v, &end, 10);
    return *end || tp < 1 || tp > 4096 ? 0 : (int)tp;
}

bool measured_table_fp8_weights(const cost_table *t)
{
    const char *q = ct_meta(t, "quantization");
    return q && strncmp(q, "fp8", 3) == 0;
}

bool measured_table_fp8_kv(const cost_table *t)
{
    const char *kv = ct_meta(t, "kv_cache_dtype");
    return kv && strncmp(kv, "fp8", 3) == 0;
}

const char *measured_precision_words(bool fp8_weights, bool fp8_kv)
{
    if (fp8_weights) return fp8_kv ? "with FP8 weights and KV cache" : "with FP8 weights and a bf16 KV cache";
    return fp8_kv ? "with bf16 weights and an FP8 KV cache" : "in bf16";
}

/* The precision a table prices: 0 bf16, 1 FP8 weights and KV cache, 2 FP8 weights alone, 3 an
 * FP8 KV cache alone. */
static int table_precision(const cost_table *t)
{
    return measured_table_fp8_weights(t) ? (measured_table_fp8_kv(t) ? 1 : 2) : measured_table_fp8_kv(t) ? 3 : 0;
}

int measured_find(const char *gpu, const char *shape, int tp, bool fp8_weights, bool fp8_kv, const char *version,
                  char *path, size_t pathlen, char *why, size_t whylen)
{
    char data[4096], dir[4200];
    if (measured_data_dir(data, sizeof data) < 0) {
        snprintf(why, whylen, "no costs/ folder found (set SERVESIM_DATA_DIR to servesim's data directory)");
        return 0;
    }
    snprintf(dir, sizeof dir, "%scosts/%s", data, gpu);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, whylen, "no measured tables for %s in %scosts/", gpu, data);
        return 0;
    }
    char best_version[64] = "", other_versions[256] = "";
    int found = 0, shape_seen = 0, tp_seen = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".csv") != 0) continue;
        char file[4500], err[512];
        snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
        cost_table t;
        if (ct_read_meta(&t, file, err, sizeof err) < 0) continue;
        const char *s = ct_meta(&t, "shape"), *fw = ct_meta(&t, "framework");
        const char *v = fw && strncmp(fw, "vllm ", 5) == 0 ? fw + 5 : NULL;
        bool same_shape = s && v && strcmp(s, shape) == 0;
        tp_seen |= same_shape;
        if (same_shape && measured_table_tp(&t) == tp && measured_table_fp8_weights(&t) == fp8_weights &&
            measured_table_fp8_kv(&t) == fp8_kv) {
            shape_seen = 1;
            bool take = version[0] ? strcmp(v, version) == 0 : !found || version_cmp(v, best_version) > 0;
            if (take) {
                snprintf(best_version, sizeof best_version, "%s", v);
                snprintf(path, pathlen, "%s", file);
                found = 1;
            } else if (version[0] && strlen(other_versions) + strlen(v) + 3 < sizeof other_versions) {
                strcat(other_versions, other_versions[0] ? ", " : "");
                strcat(other_versions, v);
            }
        }
        ct_free(&t);
    }
    closedir(d);
    if (found) return 1;
    if (shape_seen)
        snprintf(why, whylen, "no measured table of vLLM %s for this model on %s (there is: %s)", version, gpu,
                 other_versions);
    else if (tp_seen)
        snprintf(why, whylen, "no measured table of this model on %s at tensor_parallel %d%s%s in %scosts/%s/", gpu, tp,
                 fp8_weights || fp8_kv ? " " : "", fp8_weights || fp8_kv ? measured_precision_words(fp8_weights, fp8_kv) : "",
                 data, gpu);
    else
        snprintf(why, whylen, "no measured table in %scosts/%s/ covers this model's shape", data, gpu);
    return 0;
}

/* One model's tables of one framework version: the tensor-parallel sizes measured. */
typedef struct listed {
    char model[256], fw[256]; /* a meta value's or a file name's length: two names cut alike were one */
    unsigned tps[4];  /* by table_precision: bit k for tp 2^k */
} listed;

void measured_list(const char *gpu, char *out, size_t len)
{
    char data[4096], dir[4200];
    out[0] = 0;
    if (measured_data_dir(data, sizeof data) < 0) return;
    snprintf(dir, sizeof dir, "%scosts/%s", data, gpu);
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort); /* sorted: the same list every run */
    listed items[64];
    size_t num = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(names[i]->d_name);
        char file[4500], err[512];
        snprintf(file, sizeof file, "%s/%s", dir, names[i]->d_name);
        cost_table t;
        if (l > 4 && strcmp(names[i]->d_name + l - 4, ".csv") == 0 && ct_read_meta(&t, file, err, sizeof err) == 0) {
            const char *m = ct_meta(&t, "model"), *fw = ct_meta(&t, "framework");
            listed key = {.tps = {0, 0, 0, 0}};
            snprintf(key.model, sizeof key.model, "%s", m ? m : names[i]->d_name);
            snprintf(key.fw, sizeof key.fw, "%s", fw ? fw : "?");
            size_t k = 0;
            while (k < num && (strcmp(items[k].model, key.model) || strcmp(items[k].fw, key.fw))) k++;
            if (k == num && num < sizeof items / sizeof items[0]) items[num++] = key;
            int tp = measured_table_tp(&t);
            for (int b = 0; k < num && b < 31; b++)
                if (tp == 1 << b) items[k].tps[table_precision(&t)] |= 1u << b;
            ct_free(&t);
        }
        free(names[i]);
    }
    if (n >= 0) free(names);
    for (size_t k = 0; k < num; k++) {
        size_t used = strlen(out);
        used += (size_t)snprintf(out + used, len - used, "%s%s (%s", used ? ", " : "", items[k].model, items[k].fw);
        /* bf16 at tp 1 alone goes unsaid; beside other tables it is said, or "fp8 tp 1" alone
         * read as the model having no bf16 table (new-user trial) */
        bool others = items[k].tps[1] || items[k].tps[2] || items[k].tps[3];
        for (int f = 0; f < 4; f++) {
            unsigned tps = items[k].tps[f];
            if (!tps || (f == 0 && tps == 1 && !others)) continue;
            const char *sep = f == 3 ? "; fp8 kv tp " : f == 2 ? "; fp8 weights tp " : f ? "; fp8 tp " : "; bf16 tp ";
            for (int b = 0; b < 31 && used < len; b++)
                if (tps & (1u << b)) {
                    used += (size_t)snprintf(out + used, len - used, "%s%d", sep, 1 << b);
                    sep = ", ";
                }
        }
        if (used < len) snprintf(out + used, len - used, ")");
    }
}
