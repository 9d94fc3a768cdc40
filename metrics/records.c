#include "metrics/records.h"

const char *stop_reason_name(stop_reason r)
{
    switch (r) {
    case STOP_NONE: return "none";
    case STOP_LENGTH: return "length";
    case STOP_TOO_LONG: return "too_long";
    case STOP_KV_CAPACITY: return "kv_capacity";
    case STOP_ABORTED: return "aborted";
    case STOP_ERROR: return "error";
    case STOP_HANDOFF: return "handoff";
    }
    return "invalid";
}
