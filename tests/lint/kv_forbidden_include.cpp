// Layering probe, expected NOT to compile: core/kv may not include core/model (model depends
// on kv), and kvc_core_kv's include view does not contain it.
#include "core/kv/kv_cache.h"
#include "core/model/model.h"
