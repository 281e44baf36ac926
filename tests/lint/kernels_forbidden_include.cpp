// Layering probe, expected NOT to compile: the kernels depend on nothing of kvchat's.
#include "core/util/result.h"
#include "kernels/cpu/kv_block.h"
