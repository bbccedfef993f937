/* fold.h - the element-wise folds the extension computes itself (op.c calls them): inout[i] =
 * in[i] op inout[i] over the basic elements of one kind, for every pair of a predefined op and
 * a basic kind that MPI defines, and AVG's last division. Plain C over shmcoll_py.h's enums:
 * no Python call, so a C program can test the kernels alone. */
#ifndef SHMCOLL_FOLD_H
#define SHMCOLL_FOLD_H

#include "shmcoll_py.h"

#include <stddef.h>

/* inout[i] = in[i] op inout[i] for i < n basic elements (a pair of MAXLOC is one), packed
 * as py__basic_size says, at any alignment. in is the lower rank's contribution (the order
 * matters for MIN and MAX of equal values and NaNs, as in the library's scalar kernels).
 * in and inout must not overlap. */
typedef void (*py__fold_fn)(const char *restrict in, char *restrict inout, size_t n);

/* The fold of op kind (enum op_kind) on basic kind b (enum basic): AVG's is SUM's. NULL
 * where MPI does not define the op on the kind, and for OP_NULL, REPLACE, NO_OP and user
 * ops, which do no arithmetic (op.c does them). */
py__fold_fn py__fold_lookup(int kind, int basic);

/* AVG's last step: buf[i] /= size for n basic elements of b (a kind SUM is defined on),
 * size >= 1. Integers truncate toward zero; float16 and bfloat16 divide in float and round
 * once, to nearest even; complex divides both parts. */
void py__fold_avg(int basic, char *buf, size_t n, int size);

#endif
