#include "io/report.h"

#include <math.h>
#include <stdio.h>

void rpt_num(char *buf, size_t len, double v)
{
    double a = fabs(v);
    if (a >= 100 || a == 0) snprintf(buf, len, "%.0f", v);
    else if (a >= 10) snprintf(buf, len, "%.1f", v);
    else if (a >= 1) snprintf(buf, len, "%.2f", v);
    else snprintf(buf, len, "%.3g", v);
}

void rpt_change(char *buf, size_t len, const char *what, double before, double after, const char *unit)
{
    char b[32], a[32];
    rpt_num(b, sizeof b, before);
    rpt_num(a, sizeof a, after);
    const char *sp = unit[0] ? " " : "";
    if (before == 0 && after == 0) {
        snprintf(buf, len, "left %s unchanged (0%s%s)", what, sp, unit);
        return;
    }
    if (before == 0) {
        snprintf(buf, len, "%s %s from 0 to %s%s%s", after > 0 ? "raised" : "cut", what, a, sp, unit);
        return;
    }
    double pct = 100 * (after - before) / fabs(before);
    if (before > 0 && after / before >= 10) { /* a percentage that large reads worse than the multiple */
        char times[48];
        rpt_ratio(times, sizeof times, after, before);
        snprintf(buf, len, "raised %s %s (%s → %s%s%s)", what, times, b, a, sp, unit);
    } else if (fabs(pct) < 0.05) snprintf(buf, len, "left %s unchanged (%s%s%s)", what, a, sp, unit);
    else
        snprintf(buf, len, "%s %s by %.1f%% (%s → %s%s%s)", pct < 0 ? "cut" : "raised", what, fabs(pct), b, a,
                 sp, unit);
}

void rpt_ratio(char *buf, size_t len, double a, double b)
{
    if (b == 0) snprintf(buf, len, "an unbounded multiple");
    else if (fabs(a / b) >= 10) snprintf(buf, len, "%.0f×", a / b);
    else if (fabs(a / b) >= 1) snprintf(buf, len, "%.1f×", a / b);
    else snprintf(buf, len, "%.2f×", a / b);
}

void rpt_percent(char *buf, size_t len, double fraction)
{
    snprintf(buf, len, "%.1f%%", 100 * fraction);
}
