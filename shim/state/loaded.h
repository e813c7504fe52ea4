/*
 * loaded.h - the images a process has loaded, by module or library handle.
 *
 * A load hook records each image the driver accepted (loaded_add,
 * loaded_add_file); afterwards the facts of a kernel - from the cubin the
 * device actually runs - are looked up by (owner handle, kernel name).
 *
 * When the image is parsed:
 *   - bytes the caller may free after the call (Triton's cubin, cuBLASLt's
 *     unpreserved ELFs, files) are parsed during the load call, and only what
 *     is needed is kept (names, sizes, parameter layouts);
 *   - bytes that live as long as their library (cudart's registered fatbins,
 *     CU_LIBRARY_BINARY_IS_PRESERVED) are parsed on the first lookup, so a
 *     process pays only for the images whose kernels the shim has to look at.
 * Each image also keeps its provenance - its kind, a fatbin's codes, the
 * device, whether it came from a file, the shared object that loaded it -
 * the evidence route_decide weighs under an emulated target (evidence.h).
 * Shared objects are interned by path, and the codes of their own
 * .nv_fatbin read once, on first need.
 * Not on the launch path: one mutex guards the table (reset in a forked child).
 */
#ifndef SM120_SHIM_STATE_LOADED_H
#define SM120_SHIM_STATE_LOADED_H

#include "../../core/image/image.h"
#include "../../core/route/evidence.h"

/*
 * A shared object that loaded images (the caller of a load hook), interned by
 * path: one record per path for the life of the process, never freed, so a
 * kernel's facts may point at it after its image is unloaded.
 */
struct loaded_library;

/*
 * Where an image came from: what evidence_library (core/route/evidence.h)
 * weighs to tell a library kernel from one the target would run.  Pointers
 * are interned (never freed); NULL when unknown.
 */
struct loaded_provenance {
	enum evidence_image image;         /* what the image was */
	int device_sm;                     /* the device it was loaded for; 0 unknown */
	int from_file;                     /* loaded from a file: the origin is its path */
	int runtime_compiled;              /* loaded while the runtime-compiled flag was set */
	const struct evidence_codes *codes; /* a fatbin's codes, from its entry headers */
	struct loaded_library *loader;     /* the shared object that called the load */
};

/* The facts of one kernel as loaded: a self-contained copy. */
struct loaded_facts {
	uint32_t static_smem;     /* declared __shared__ bytes */
	int64_t dynamic_smem;     /* declared dynamic bytes, -1 if set at launch */
	int32_t regs;             /* registers per thread, -1 if unknown */
	uint32_t param_bytes;     /* size of the parameter block */
	uint32_t n_params;
	struct img_param *params; /* malloc'd by loaded_find; the caller frees it */
	int sm;                   /* the cubin's SM: 90, 120 */
	char variant;             /* 'a', 'f' or 0 */
	struct loaded_provenance prov; /* of the image it came from (loaded_provenance) */
};

/* What a load was, for the load event. */
struct loaded_summary {
	enum img_kind kind;       /* what the image is */
	int deferred;             /* kept to be parsed on first lookup */
	int sm;                   /* SM of the cubin chosen for the device, 0 if none/deferred */
	char variant;
	int64_t n_kernels;        /* kernels in that cubin, -1 if not parsed yet or none */
};

/*
 * loaded_runs_on - can the driver run a cubin built for sm_@arch (@variant
 * 'a', 'f' or 0) on a device of compute capability @device_sm (major*10 +
 * minor)?  Same major and minor <= the device's; 'a' only on the exact SM
 * (evidence_runs_on: the rule is written once).
 */
int loaded_runs_on(int arch, char variant, int device_sm);

/*
 * loaded_add - record @image[0..len), which the driver loaded as @owner for a
 * device of @device_sm.  @image may be a cubin, a fatbin container or PTX
 * (a cudart wrapper must be resolved by the caller: img_wrapper_fatbin).
 * @preserved: the bytes outlive @owner, so parsing may wait for the first
 * lookup; otherwise the image is parsed now.  @origin names it in messages
 * ("libtorch_cuda.so+0x4a2000").  Fills @sum.  Returns 0, or -errno with
 * @err naming the image and the defect (the owner is then recorded as having
 * no facts: lookups fall back to the driver).
 */
int loaded_add(void *owner, const void *image, size_t len, int device_sm, int preserved,
	       const char *origin, struct loaded_summary *sum, struct sm_err *err);

/* loaded_add_file - as loaded_add, for an image loaded from the file @path (parsed now). */
int loaded_add_file(void *owner, const char *path, int device_sm, struct loaded_summary *sum,
		    struct sm_err *err);

/*
 * loaded_find - the facts of kernel @name in @owner's image, parsing a
 * deferred image first.  Copies the image's origin into @origin (@n bytes).
 * Returns 0 and fills @out (free out->params), -ENOENT if the owner or kernel
 * is unknown or the image has no cubin for the device (PTX), or another
 * -errno with @err when a deferred image turns out malformed (reported once:
 * later lookups answer -ENOENT).
 */
int loaded_find(const void *owner, const char *name, struct loaded_facts *out, char *origin,
		size_t n, struct sm_err *err);

/* loaded_drop - forget @owner's image (module or library unloaded). */
void loaded_drop(const void *owner);

/*
 * loaded_set_loader - record that @owner's image (already added) was loaded
 * by the shared object at @loader_path (NULL: unknown), and whether the
 * runtime-compiled flag was set then.  Returns 0, or -ENOENT when @owner has
 * no image record.
 */
int loaded_set_loader(const void *owner, const char *loader_path, int runtime_compiled);

/*
 * loaded_provenance - where @owner's image came from, into @out (a deferred
 * image's fatbin codes are read from its entry headers now).  Returns 0, or
 * -ENOENT when @owner is unknown (then @out says nothing is known).
 */
int loaded_provenance(const void *owner, struct loaded_provenance *out);

/* loaded_library_path - the path @lib was interned under. */
const char *loaded_library_path(const struct loaded_library *lib);

/*
 * loaded_library_codes - the codes of @lib's own .nv_fatbin section, read
 * from its fatbin entry headers on the first call (the file is mapped, only
 * the headers are touched, nothing is inflated) and cached for the process.
 * NULL when the file has no such section or cannot be read.  Not for the
 * launch fast path: the first call reads the file.
 */
const struct evidence_codes *loaded_library_codes(struct loaded_library *lib);

/* loaded_path_codes - loaded_library_codes of the shared object at @path (interned). */
const struct evidence_codes *loaded_path_codes(const char *path);

#endif
