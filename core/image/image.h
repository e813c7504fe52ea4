/*
 * image.h - the image reader: what a CUDA image says about its kernels.
 *
 * An "image" is anything the driver can load or a file can hold: a cubin (CUDA
 * ELF, both ABIs), a fatbin container (0xBA55ED50, possibly several
 * concatenated, entries optionally LZ4- or zstd-compressed), the fatbin wrapper
 * struct cudart registers (0x466243B1), a host ELF whose .nv_fatbin or
 * __nv_relfatbin section holds fatbins, an ar archive (.a) of such objects,
 * or a Triton cache directory (<hash>/<name>.cubin + <name>.json).
 *
 * Layers, lowest first:
 *   elf_check.c  img_elf_check: an ELF's tables and sections lie inside its
 *             bytes (libelf does not check; elf_check.h)
 *   cubin.c   img_cubin_parse: one cubin -> per-kernel facts (libelf)
 *   fatbin.c  img_fatbin_*: walk containers and entries, inflate payloads
 *   section.c img_elf_section: one named section of a host ELF, headers only
 *   scan.c    img_scan_buffer: any buffer -> callbacks per cubin (files and
 *             directories: tools/sm120/scan_files.h, which builds on scan_walk.h)
 *
 * Every function treats its input as hostile: it never reads outside the
 * buffer it was given, and every failure is reported as -errno plus a
 * struct sm_err naming the origin and the defect.
 */
#ifndef SM120_CORE_IMAGE_IMAGE_H
#define SM120_CORE_IMAGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

/* ---------------------------------------------------------------- cubins */

/* One kernel parameter, from KPARAM_INFO (0x17) or KPARAM_INFO_V2 (0x45). */
struct img_param {
	uint32_t ordinal;
	uint32_t offset;   /* byte offset inside the parameter block */
	uint32_t size;     /* bytes */
};

/* Facts about one kernel (an entry function) of a cubin. */
struct img_kernel {
	char *name;                    /* mangled entry name, owned */
	uint32_t static_smem;          /* __shared__ bytes the kernel declares; what
					  cuFuncGetAttribute(SHARED_SIZE_BYTES) reports */
	uint32_t static_smem_section;  /* size of .nv.shared.<k> as stored: in linked
					  sm_90+ cubins it includes the 1 KiB the
					  driver reserves */
	int64_t dynamic_smem;          /* dynamic bytes if the image says (Triton JSON
					  "shared", or our kernels' sm120_dynamic_smem__
					  marker), else -1: it is set at launch */
	int32_t regs;                  /* REGCOUNT, -1 if absent */
	uint32_t max_threads[3];       /* __launch_bounds__ (MAX_THREADS), 0 if unset */
	uint32_t reqntid[3];           /* REQNTID, 0 if unset */
	uint32_t frame_size;           /* FRAME_SIZE: per-thread local memory bytes */
	uint32_t param_bytes;          /* CBANK_PARAM_SIZE */
	uint32_t n_params;
	struct img_param *params;      /* ascending ordinal, owned */
	int params_v2;                 /* 1 if described by KPARAM_INFO_V2 */
};

/* A parsed cubin. */
struct img_cubin {
	int abi;                /* 1: OSABI 0x33 / ABI version 7; 2: OSABI 0x41 / ABI version 8 */
	int sm;                 /* SM number from e_flags: 90, 120, ... */
	char variant;           /* 'a' (arch-specific), 'f' (family) or 0 (plain / unknown) */
	uint32_t reserved_smem; /* bytes the driver reserves per block (1024 on
				   sm_90+, else 0) */
	int relocatable;        /* ET_REL (-rdc objects): .nv.shared.<k> holds the
				   static size alone; linked cubins add reserved_smem */
	uint32_t cuda_api;      /* from .note.nv.cuinfo: 130 = CUDA 13.0; 0 if absent */
	uint32_t n_kernels;
	struct img_kernel *kernels; /* owned */
};

/*
 * img_cubin_parse - read the kernels of the cubin in @buf[0..len).
 * @origin names the image in error messages ("a.fatbin entry 3").
 * The buffer is only read; it may be freed after the call.  On success
 * returns 0 and @out owns its memory (release with img_cubin_free); on
 * failure returns -EINVAL (malformed), -ENOTSUP (an ELF ABI this reader does
 * not know, or a libelf too old) or -ENOMEM, and @out is left empty.
 */
int img_cubin_parse(const void *buf, size_t len, const char *origin,
		    struct img_cubin *out, struct sm_err *err);

/* img_cubin_free - release what img_cubin_parse allocated; @c may be empty. */
void img_cubin_free(struct img_cubin *c);

/* img_cubin_find - the kernel named @name, or NULL. */
const struct img_kernel *img_cubin_find(const struct img_cubin *c, const char *name);

/* ---------------------------------------------------------------- fatbins */

#define IMG_FATBIN_MAGIC 0xBA55ED50u
#define IMG_WRAPPER_MAGIC 0x466243B1u

enum img_entry_kind {
	IMG_ENTRY_PTX = 1,
	IMG_ENTRY_ELF = 2,
};

enum img_compression {
	IMG_COMP_NONE = 0,
	IMG_COMP_LZ4,   /* flag 0x2000: raw LZ4 block */
	IMG_COMP_ZSTD,  /* flag 0x8000: zstd frame */
};

/* One entry of a fatbin container, as found (payload not inflated). */
struct img_fatbin_entry {
	uint16_t kind;                  /* enum img_entry_kind, or another value */
	uint32_t arch;                  /* SM number: 90, 120 */
	char variant;                   /* 'a', 'f' or 0, from the flags */
	enum img_compression compression;
	uint64_t flags;
	const uint8_t *payload;         /* points into the container */
	size_t payload_len;             /* stored bytes (compressed size if compressed) */
	uint64_t uncompressed_len;      /* size after inflating */
	uint32_t container;             /* 0-based index of the container */
	uint32_t index;                 /* 0-based index inside its container */
	size_t offset;                  /* byte offset of the entry header in the buffer */
};

/* Iterator over every entry of every container concatenated in a buffer. */
struct img_fatbin_iter {
	const uint8_t *buf;
	size_t len;
	size_t pos;            /* next entry header, or next container if pos == end */
	size_t end;            /* end of the current container */
	uint32_t container;    /* index of the current container */
	uint32_t index;        /* index of the next entry in it */
	int started;
};

/* img_fatbin_iter_init - start iterating the containers in @buf[0..len). */
void img_fatbin_iter_init(struct img_fatbin_iter *it, const void *buf, size_t len);

/*
 * img_fatbin_iter_next - the next entry.  Returns 1 and fills @e, 0 at the
 * end, or -EINVAL when the bytes are malformed (bad magic, a size that runs
 * past the buffer); after an error the iterator stays at its end.
 */
int img_fatbin_iter_next(struct img_fatbin_iter *it, struct img_fatbin_entry *e,
			 const char *origin, struct sm_err *err);

/*
 * img_fatbin_entry_inflate - a malloc'd copy of @e's payload, decompressed if
 * needed.  The caller frees *@out.  Returns 0, -EINVAL (corrupt or lying
 * sizes), -ENOTSUP (unknown compression flag) or -ENOMEM.
 */
int img_fatbin_entry_inflate(const struct img_fatbin_entry *e, void **out, size_t *out_len,
			     const char *origin, struct sm_err *err);

/*
 * img_fatbin_size - bytes spanned by the container(s) starting at @buf when
 * only a pointer is known (cuModuleLoadFatBinary passes no size): one
 * container, 16 + fat_size.  Reads at most 16 bytes.  0 if not a container.
 */
size_t img_fatbin_size(const void *buf);

/* ---------------------------------------------------------------- in-process images */

/*
 * The driver API passes images by pointer alone.  These helpers size them the
 * way the driver must: from their own headers.  They read only what the
 * headers say the image spans, so they trust the pointer as the driver does;
 * use them on images handed to a driver call, never on file contents (file
 * readers know the length and call the functions above).
 */

/*
 * img_wrapper_fatbin - the fatbin container a __fatBinC_Wrapper_t
 * (u32 magic 0x466243B1, u32 version, const void *data, void *filename)
 * points at, as cudart passes to cuLibraryLoadData.  Returns the container and
 * stores its size in *@len, or NULL if @wrapper is not a wrapper of a
 * container.
 */
const void *img_wrapper_fatbin(const void *wrapper, size_t *len);

/*
 * img_image_size - bytes spanned by the image at @buf: a cubin or other ELF
 * (the furthest end of its header tables and non-empty sections), a fatbin
 * container (16 + fat_size) or NUL-terminated PTX (strlen + 1).  0 for a
 * wrapper (use img_wrapper_fatbin) or anything unrecognised.
 */
size_t img_image_size(const void *buf);

/*
 * img_elf_section - the section named @name of the 64-bit little-endian ELF
 * in @buf[0..len), from the section headers alone: stores its byte offset
 * and size.  Returns 0, -ENOENT when there is no such section (or it has no
 * file contents), or -EINVAL when @buf is no such ELF or a header points
 * outside it (section.c).
 */
int img_elf_section(const void *buf, size_t len, const char *name, size_t *off, size_t *size);

/* ---------------------------------------------------------------- scanning */

/* Where a cubin was found. */
struct img_origin {
	const char *file;       /* path, or a caller-chosen label for memory */
	const char *member;     /* in an ar archive @file: the member ("x.o"; in an
				   archive inside it "inner.a(x.o)"), else NULL */
	int in_fatbin;          /* 1 if it came out of a fatbin entry */
	uint32_t container;     /* fatbin container index (if in_fatbin) */
	uint32_t entry;         /* entry index inside the container (if in_fatbin) */
	enum img_compression compression;
	char variant;           /* from the fatbin entry, 0 if none */
	int triton;             /* 1 if from a Triton cache (dynamic_smem from JSON) */
};

/*
 * Why a directory walk (img_scan_path, tools/sm120/scan_files.h) passed over a
 * path without an error.  Anything that looks like an image but cannot be
 * read (a cut ELF, a corrupt archive member) is an error, never a skip.
 */
enum img_skip {
	IMG_SKIP_NOT_IMAGE = 1, /* no ELF, ar, fatbin or PTX signature: .py, .txt, empty */
	IMG_SKIP_PTX,           /* PTX text: JIT-compiled at load; Triton keeps the cubin too */
	IMG_SKIP_LINK,          /* a symbolic link below the starting path: never followed */
	IMG_SKIP_SPECIAL,       /* neither a file nor a directory: FIFO, socket, device */
};

/* Callbacks of a scan; any may be NULL.  Return non-zero from on_cubin to stop. */
struct img_visitor {
	int (*on_cubin)(void *user, const struct img_origin *where, const struct img_cubin *cubin);
	void (*on_ptx)(void *user, const struct img_origin *where, uint32_t arch);
	void (*on_error)(void *user, const struct sm_err *err);
	uint32_t arch_filter;   /* only fatbin entries of this SM (0: all); skips inflating others */
	void *user;
	/* A path a directory walk did not read, and why (img_scan_path only). */
	void (*on_skip)(void *user, const char *path, enum img_skip why);
};

enum img_kind {
	IMG_KIND_UNKNOWN = 0,
	IMG_KIND_CUBIN,         /* ELF, e_machine EM_CUDA */
	IMG_KIND_HOST_ELF,      /* any other ELF: look for .nv_fatbin / __nv_relfatbin */
	IMG_KIND_FATBIN,        /* container magic 0xBA55ED50 */
	IMG_KIND_WRAPPER,       /* __fatBinC_Wrapper_t, magic 0x466243B1 (memory only) */
	IMG_KIND_PTX,           /* NUL-terminated PTX text */
	IMG_KIND_ARCHIVE,       /* ar archive ("!<arch>\n", .a): every member by content */
};

/* img_classify - what @buf[0..len) is, from its first bytes. */
enum img_kind img_classify(const void *buf, size_t len);

/* img_kind_name - "cubin", "fatbin", ... for messages. */
const char *img_kind_name(enum img_kind k);

/*
 * img_scan_buffer - find every cubin in @buf[0..len) (any kind above except the
 * wrapper, whose data pointer is only meaningful in the loading process) and
 * call @v for each.  @label names the buffer in origins and messages.  An
 * ELF (or archive member) whose tables or sections run past its bytes is an
 * error ("truncated ELF: ..."); archive members that are no image (the
 * index, data files) are passed over.
 * Returns the number of errors reported through on_error (0 when clean), or
 * -EINVAL if @buf is no image at all.  Parsing continues past a bad entry.
 */
int img_scan_buffer(const void *buf, size_t len, const char *label, const struct img_visitor *v);

#endif
