/*
 * evidence.h - under an emulated target, was an over-limit kernel chosen by a
 * shipped library for the device's architecture?  The facts the shim gathers
 * about a kernel's image, and the one pure decision over them, which
 * route_decide calls.
 *
 * Emulation changes the limits a process sees, not the GPU's architecture:
 * cuBLAS/cuBLASLt, cuDNN, NCCL and CUTLASS-based ahead-of-time kernels still
 * pick their sm_90 code on a Hopper card.  A real SM120 card never runs those
 * kernels: the library would pick its sm_120 code there.  Such kernels are
 * passed to the driver unchanged and logged as class "library" - never
 * refused, never counted as SM120 failures.  Kernels compiled at run time
 * (Triton) are what the card would run too: they stay judged.
 *
 * What counts as evidence.  A kernel is a library kernel only when all of:
 *   1. the target is emulated: a named GPU profile whose SM differs from the
 *      device the image was loaded for (on the target itself nothing changes;
 *      a byte-count target names no architecture a library could choose);
 *   2. no reroute rule names the kernel (those are rerouted or refused);
 *   3. nothing says it was compiled at run time: the image was not loaded
 *      while the runtime-compiled flag was set (the Python hook sets it
 *      around Triton's loads), and neither the image's file nor the shared
 *      object that loaded it lies under a Triton or Inductor cache;
 *   4. and either
 *      a. the image is a fatbin (cudart's registered wrapper or a bare
 *         container) that also holds code the target runs: a cubin of the
 *         target's major SM with a minor no newer ('a' variants only on the
 *         exact SM), or PTX of the target's own generation.  The library was
 *         built for the target, and the card would load that code instead.
 *         PTX of an older generation is no evidence: the card would JIT the
 *         very kernel that runs here, with the same launch;
 *      b. or the image is a raw cubin handed over from memory (cuBLASLt picks
 *         ELF entries out of its own fatbin by architecture and loads them
 *         one at a time) by a shared object whose own .nv_fatbin section
 *         holds code the target runs, as in (a).  A cubin loaded from a file
 *         (Triton's and Inductor's caches) is no evidence: libraries embed
 *         their code.
 * Anything else - the image unknown (facts from the driver), PTX, a loader
 * that cannot be read - is judged as on the card, and the reason says which
 * evidence was missing: when unsure, judge.
 */
#ifndef SM120_CORE_ROUTE_EVIDENCE_H
#define SM120_CORE_ROUTE_EVIDENCE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../limits/target.h"

/* The most distinct codes kept per fatbin (sm_50 .. sm_121 with variants and PTX fit). */
#define EVIDENCE_MAX_CODES 32

/* One kind of code a fatbin holds. */
struct evidence_code {
	uint16_t arch;      /* SM number: 90, 120 */
	char variant;       /* 'a', 'f' or 0 */
	uint8_t ptx;        /* 1: PTX, JIT-compiled at load; 0: a cubin (SASS) */
};

/* The distinct codes of a fatbin, in the order first seen. */
struct evidence_codes {
	uint32_t n;
	int truncated;      /* more distinct codes than EVIDENCE_MAX_CODES: the rest dropped */
	struct evidence_code c[EVIDENCE_MAX_CODES];
};

/* What the launched kernel's image was. */
enum evidence_image {
	EVIDENCE_IMAGE_UNKNOWN = 0, /* not read: the kernel is known from the driver alone */
	EVIDENCE_IMAGE_FATBIN,      /* a fatbin container, bare or behind cudart's wrapper */
	EVIDENCE_IMAGE_CUBIN,       /* a raw ELF cubin */
	EVIDENCE_IMAGE_PTX,         /* PTX text, JIT-compiled for the device at load */
};

/* Everything the decision looks at; pointers may be NULL (unknown). */
struct route_evidence {
	int device_sm;              /* the device the image was loaded for (major*10 + minor), 0
				       unknown */
	enum evidence_image image;
	const char *origin;         /* names the image in messages ("libnccl.so.2+0x1a2000") */
	const struct evidence_codes *codes;        /* FATBIN: what it holds */
	const char *file;           /* the file the image was loaded from (cuModuleLoad,
				       cuLibraryLoadFromFile), NULL when handed over from memory */
	const char *loader;         /* path of the shared object that called the load, NULL unknown */
	const struct evidence_codes *loader_codes; /* what the loader's .nv_fatbin holds; NULL:
						     none, or it could not be read */
	int runtime_compiled;       /* loaded while the runtime-compiled flag was set (Triton) */
};

/*
 * evidence_runs_on - does a device of compute capability @sm (major*10 +
 * minor) run code built for @arch/@variant?  Same major, minor <= the
 * device's, 'a' only on the exact SM: the driver's rule for cubins.  PTX is
 * held to the same rule here, though the driver JIT-compiles it forward to
 * any newer SM: only PTX of the device's own generation shows that the code
 * was built for it (see the header comment).
 */
int evidence_runs_on(int arch, char variant, int sm);

/* evidence_codes_add - add (@arch, @variant, @ptx) to @c unless it is there already. */
void evidence_codes_add(struct evidence_codes *c, int arch, char variant, int ptx);

/*
 * evidence_codes_from_fatbin - the codes of every entry of the fatbin
 * container(s) in @buf[0..len), read from the entry headers alone (nothing is
 * inflated).  Fills @out with what was read before any defect; returns 0, or
 * -EINVAL when the containers are malformed.
 */
int evidence_codes_from_fatbin(const void *buf, size_t len, struct evidence_codes *out);

/*
 * evidence_codes_format - @c as "sm_90 sm_100a sm_120 compute_120" into @out
 * (@n bytes; "" for none, a trailing " ..." if @c was truncated).  Returns
 * @out.
 */
char *evidence_codes_format(const struct evidence_codes *c, char *out, size_t n);

/*
 * evidence_codes_parse - the inverse of evidence_codes_format, for replays of
 * logs.  Returns 0, or -EINVAL with @err naming the token that is no code.
 */
int evidence_codes_parse(const char *s, struct evidence_codes *out, struct sm_err *err);

/* evidence_image_name - "fatbin", "cubin", "PTX" (as load events name them); NULL for UNKNOWN. */
const char *evidence_image_name(enum evidence_image k);

/* evidence_image_parse - the inverse of evidence_image_name; UNKNOWN for NULL or anything else. */
enum evidence_image evidence_image_parse(const char *s);

/*
 * evidence_runtime_path - does @path lie under a runtime compiler's cache?
 * True when a directory component is "triton" or ".triton" (Triton's
 * ~/.triton/cache, Inductor's .../triton/<rank>, the triton package itself)
 * or starts with "torchinductor_" (/tmp/torchinductor_<user>).  Erring
 * towards true only judges more kernels.
 */
int evidence_runtime_path(const char *path);

/*
 * evidence_library - the decision: 1 when @e shows that kernel @kernel was
 * chosen by a shipped library for the device's architecture and a real card
 * of target @t would run other code (the rules in this header's comment),
 * else 0.  @rule_named: a reroute rule names the kernel.  @why (may be NULL)
 * says which evidence decided, in one line: for 1 what was found, for 0 why
 * the kernel is judged; it is empty when @t is not emulated (the device is
 * the target: nothing to decide) and when @e is NULL (nothing was gathered,
 * as in logs written before the evidence was: judged, silently).  Pure.
 */
int evidence_library(const struct route_evidence *e, const struct target_limits *t,
		     const char *kernel, int rule_named, struct sm_err *why);

#endif
