/* dtype.c - the element types and operations: sizes and names (kernels.h). */
#include "lib/kernels/kernels.h"

static const char *const dtype_names[SHMCOLL_DTYPE_COUNT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64",
};

static const char *const op_names[SHMCOLL_OP_COUNT] = {
    "sum", "prod", "min", "max", "avg", "band", "bor", "bxor",
};

const char *shmcoll__dtype_name(uint32_t dtype)
{
	return dtype < SHMCOLL_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

const char *shmcoll__op_name(uint32_t op)
{
	return op < SHMCOLL_OP_COUNT ? op_names[op] : "unknown";
}
