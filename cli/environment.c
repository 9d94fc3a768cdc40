#include "cli/environment.h"


#include <gsl/gsl_version.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

int env_json(json_t *obj, const char *backend, const char *device, int threads)
{
    char cpu[256], commit[64], kernel[300];
    struct utsname u;
    cpu_model(cpu, sizeof cpu);
    env_git_commit(commit, sizeof commit);
    snprintf(kernel, sizeof kernel, "%s", uname(&u) == 0 ? u.release : "unknown");
    json_t *env = json_object();
    int bad = !env || json_put(env, "backend", json_text(backend)) | json_put(env, "device", json_text(device)) |
              json_put(env, "cpu", json_text(cpu)) | json_put(env, "threads", json_integer(threads)) |
              json_put(env, "online_cpus", json_integer(sysconf(_SC_NPROCESSORS_ONLN))) |
              json_put(env, "gsl", json_text(GSL_VERSION)) | json_put(env, "openblas_core", json_text(kb_cpu_blas_core())) |
              json_put(env, "linux", json_text(kernel)) | json_put(env, "compiler", json_text(__VERSION__)) |
              json_put(env, "servesim_commit", json_text(commit));
    if (bad) {
        json_decref(env);
        return -1;
    }
    return json_put(obj, "environment", env);
}

void env_fix_blas_core(char **argv)
{
    const char *core = kb_cpu_blas_better_core();
    if (!core || getenv("OPENBLAS_CORETYPE")) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
}

void env_raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}
