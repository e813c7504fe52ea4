/*
 * preload.c - puts the Python hook (sitecustomize.py and sm120shim_hook.py,
 * in python/ beside libsm120shim.so) at the front of PYTHONPATH, so that a
 * Python process started under the shim, or by a process under it, loads
 * Triton kernels through the hook (shim/gate/triton.h).
 *
 * It runs as a constructor, before main and before any thread: that is the
 * last moment an interpreter in this process has not read PYTHONPATH yet.
 * Only with SM120SHIM_ADVERTISE kernel (the default) and a mode other than
 * off; an existing PYTHONPATH is kept after it, and nothing happens if the
 * directory is missing or already there.  Without the hook Triton meets the
 * target's limit for every kernel: nothing is rerouted, nothing is worse than
 * on the card.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/settings/settings.h"

/* on_path - is @dir one of the ':'-separated entries of @path? */
static int on_path(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	const char *p = path;

	while (p && *p) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n && strncmp(p, dir, n) == 0)
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* hook_dir - python/ beside this library into @out (PATH_MAX bytes); 0 if it has the hook. */
static int hook_dir(char *out)
{
	Dl_info info;
	char file[PATH_MAX + 32];
	const char *slash;

	if (!dladdr((void *)hook_dir, &info) || !info.dli_fname ||
	    !(slash = strrchr(info.dli_fname, '/')) ||
	    snprintf(out, PATH_MAX, "%.*s/python", (int)(slash - info.dli_fname),
		     info.dli_fname) >= PATH_MAX)
		return -1;
	snprintf(file, sizeof(file), "%s/sitecustomize.py", out);
	return access(file, R_OK) == 0 ? 0 : -1;
}

__attribute__((constructor)) static void preload_python_hook(void)
{
	static struct settings s; /* 4 KiB of log path: not on the stack */
	struct settings_env env;
	char dir[PATH_MAX], *value;
	const char *old;
	size_t n;

	settings_env_read(&env, getenv);
	settings_resolve(&env, 0, 0, &s, NULL, NULL);
	if (s.mode == SHIM_MODE_OFF || !s.advertise_kernel || hook_dir(dir) != 0)
		return;
	old = getenv("PYTHONPATH");
	if (old && on_path(old, dir))
		return;
	n = strlen(dir) + (old ? strlen(old) : 0) + 2;
	if (!(value = malloc(n)))
		return;
	snprintf(value, n, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
	setenv("PYTHONPATH", value, 1);
	free(value);
}
