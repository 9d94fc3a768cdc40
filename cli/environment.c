#include "cli/environment.h"


#include <gsl/gsl_version.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "io/results.h"
#include "kernels/cpu/blas_core.h"

static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "model name : %255[^\n]", out) == 1) break;
    fclose(f);
}

void env_git_commit(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *p = popen("git -C '" SERVESIM_SOURCE_DIR "' rev-parse --short HEAD 2>/dev/null", "r");
    if (!p) return;
    char buf[64];
    if (fgets(buf, sizeof buf, p)) {
        buf[strcspn(buf, "\n")] = 0;
        if (buf[0]) snprintf(out, len, "%s", buf);
    }
    pclose(p);
}

static void json_string(FILE *f, const char *key, const char *value, const char *sep)
{
    fprintf(f, "    \"%s\": ", key);
    res_json_string(f, value);
    fprintf(f, "%s\n", sep);
}

void env_write_json(FILE *f, const char *backend, const char *device, int threads)
{
    char cpu[256], commit[64], kernel[300];
    struct utsname u;
    cpu_model(cpu, sizeof cpu);
    env_git_commit(commit, sizeof commit);
    snprintf(kernel, sizeof kernel, "%s", uname(&u) == 0 ? u.release : "unknown");
    fprintf(f, "  \"environment\": {\n");
    json_string(f, "backend", backend, ",");
    json_string(f, "device", device, ",");
    json_string(f, "cpu", cpu, ",");
    fprintf(f, "    \"threads\": %d,\n    \"online_cpus\": %ld,\n", threads, sysconf(_SC_NPROCESSORS_ONLN));
    json_string(f, "gsl", GSL_VERSION, ",");
    json_string(f, "openblas_core", kb_cpu_blas_core(), ",");
    json_string(f, "linux", kernel, ",");
    json_string(f, "compiler", __VERSION__, ",");
    json_string(f, "servesim_commit", commit, "");
    fprintf(f, "  }");
}

void env_fix_blas_core(char **argv)
{
    const char *core = kb_cpu_blas_better_core();
    if (!core || getenv("OPENBLAS_CORETYPE")) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
}
