/*
 * compiled.h - what a runtime compiler fixed in a kernel, as text the shim
 * can carry from the compiler's process state to the launch decision.
 *
 * Triton compiles each specialisation of a kernel with its constexprs
 * (BLOCK_SIZE_M, top_k, compute_type, ...), its launch options (num_warps,
 * num_stages) and a typed signature (a_ptr is *bf16, qo_indptr is *i64).
 * A launch shows none of this: the Python hook (shim/python) writes it down
 * when Triton loads the kernel, and rules and adapters check it.
 *
 * The text is a list of entries separated by ';':
 *   name=value   a constexpr or a launch option (bools as 1 and 0)
 *   name:type    the type of a runtime argument ("*bf16", "i32", "fp32")
 *   compiled_args=a,b   the arguments among the name=value entries that the
 *                kernel does not declare constexpr: Triton compiled them in
 *                because they were passed as None or as an int equal to 1
 *                (absent when the hook could not tell)
 * Names and values hold no ';', '=' or ':'.  Pure functions, no allocation.
 */
#ifndef SM120_CORE_RULES_COMPILED_H
#define SM120_CORE_RULES_COMPILED_H

#include <stddef.h>
#include <stdint.h>

/* The longest compiled text the shim keeps for one kernel, NUL included. */
#define COMPILED_MAX 4096

/*
 * compiled_get - the text after "@name=" (@sep '=') or "@name:" (@sep ':') in
 * @facts, copied into @out (@n bytes, NUL-terminated).  Returns 0, -ENOENT
 * when @facts is NULL or has no such entry, -ENOSPC when @out is too small.
 */
int compiled_get(const char *facts, const char *name, char sep, char *out, size_t n);

/*
 * compiled_number - constexpr or option @name of @facts as a number (decimal
 * integers, floats, 1 and 0 for bools).  Returns 0, -ENOENT if absent, -EINVAL
 * if present but not a number (a dtype, None).
 */
int compiled_number(const char *facts, const char *name, double *out);

/*
 * compiled_int - constexpr or option @name of @facts as a whole number.
 * Returns 0, -ENOENT if absent, -EINVAL if present but not a whole number
 * (a fraction, a dtype, None, beyond 2^53).
 */
int compiled_int(const char *facts, const char *name, int64_t *out);

#endif
