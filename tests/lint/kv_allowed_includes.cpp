// Layering probe (compiled with -fsyntax-only by CTest): core/kv's headers and those of the
// modules it declares compile with kvc_core_kv's include view alone.
#include "core/kv/kv_cache.h"
#include "core/util/result.h"
#include "kernels/cpu/kv_block.h"
