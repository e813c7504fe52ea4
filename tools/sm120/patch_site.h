/*
 * patch_site.h - what `sm120 patch` (cmd_patch.c: the source patches) and
 * `sm120 patch configs` (cmd_patch_configs.c: the fused-MoE config tables)
 * share: running a helper program, finding an installed Python package and
 * its version, and finding the patches/ directory of sm120-shim.
 */
#ifndef SM120_TOOLS_PATCH_SITE_H
#define SM120_TOOLS_PATCH_SITE_H

#include <limits.h>
#include <stddef.h>

/* At most this many site-packages directories are asked of Python. */
#define PATCH_MAX_SITES 4

/* One installed package: where, which version, and (sm120 patch) which patch set. */
struct patch_install {
	const char *framework;   /* the distribution and import name: sglang, vllm, triton */
	char site[PATH_MAX];
	char dist[NAME_MAX + 1]; /* sglang-0.5.8.dist-info */
	char version[128];
	char set[PATH_MAX];      /* patches/<framework>/<line>; set by sm120 patch only */
};

/* patch_say - a message into @out (@cap bytes), cut short if it must be. */
void patch_say(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* patch_fail - "@who: <message>" and a newline on stderr; returns @code (an exit status). */
int patch_fail(const char *who, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* patch_pathf - a path into @out (PATH_MAX bytes): 0, or -ENAMETOOLONG when it does not fit. */
int patch_pathf(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * patch_run - run @argv (argv[0] looked up on PATH) with stdin from
 * /dev/null and stdout and stderr into @out (@cap bytes, NUL-terminated, the
 * rest dropped).  Returns its exit status, 128 + the signal that ended it,
 * or -errno when it could not be started.
 */
int patch_run(char *const argv[], char *out, size_t cap);

/*
 * patch_python_sites - the purelib and platlib directories of $PYTHON (else
 * python3), distinct, in @sites; *@who is the Python asked.  Their number,
 * or -1 with @err saying why and what to pass instead.
 */
int patch_python_sites(char sites[PATCH_MAX_SITES][PATH_MAX], const char **who, char *err,
		       size_t cap);

/*
 * patch_find_install - package @name installed in @site: fills @in (site,
 * dist-info name, version from its METADATA; not set).  Returns 1 found, 0
 * not there, -1 with @err when what is there cannot be used (two versions,
 * an editable install, an unreadable METADATA).
 */
int patch_find_install(const char *site, const char *name, struct patch_install *in, char *err,
		       size_t cap);

/*
 * patch_patches_dir - the patches directory in @out (PATH_MAX bytes):
 * $SM120_PATCHES, else patches/ beside the sm120 program or one level
 * above.  0, or -1 with @err naming where it looked.
 */
int patch_patches_dir(char *out, char *err, size_t cap);

/*
 * patch_configs - `sm120 patch configs` (cmd_patch_configs.c; @argv[0] is
 * "configs"): our SM120 fused-MoE config tables written where the installed
 * SGLang / vLLM read them.  Exit 0 written or already there, 1 something
 * refused, 2 usage or bad input.
 */
int patch_configs(int argc, char **argv);

#endif
