/*
 * patch_site.c - see patch_site.h: a helper program's output, the installed
 * packages of a Python (site-packages, dist-info METADATA), the patches/
 * directory.
 */
#include "patch_site.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../core/common/file.h"

#define MAX_METADATA_BYTES (16u << 20)

extern char **environ;

void patch_say(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out, cap, fmt, ap);
	va_end(ap);
}

int patch_fail(const char *who, int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int patch_pathf(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, PATH_MAX, fmt, ap);
	va_end(ap);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* ------------------------------------------------------------ processes */

/* patch_run - see patch_site.h. */
int patch_run(char *const argv[], char *out, size_t cap)
{
	posix_spawn_file_actions_t fa;
	int fds[2], st, rc;
	size_t n = 0;
	ssize_t got;
	char drop[512];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		return -rc;
	}
	for (;;) {
		if (n + 1 < cap)
			got = read(fds[0], out + n, cap - 1 - n);
		else
			got = read(fds[0], drop, sizeof(drop));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		if (n + 1 < cap)
			n += (size_t)got;
	}
	out[n] = '\0';
	close(fds[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ------------------------------------------------------- site-packages */

/* patch_python_sites - see patch_site.h. */
int patch_python_sites(char sites[PATCH_MAX_SITES][PATH_MAX], const char **who, char *err,
			size_t cap)
{
	const char *py = getenv("PYTHON");
	char *argv[4], out[2 * PATH_MAX + 16], *line, *save = NULL;
	int rc, n = 0, i, dup;

	argv[0] = (char *)(py && *py ? py : "python3");
	*who = argv[0];
	argv[1] = "-c";
	argv[2] = "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); "
		  "print(p['platlib'])";
	argv[3] = NULL;
	rc = patch_run(argv, out, sizeof(out));
	if (rc != 0) {
		patch_say(err, cap, "cannot ask %s where its packages are (%s); pass "
			 "--site-packages DIR, or set PYTHON to the Python that runs the framework",
			 argv[0], rc < 0 ? strerror(-rc) : "it failed");
		return -1;
	}
	for (line = strtok_r(out, "\n", &save); line && n < PATCH_MAX_SITES;
	     line = strtok_r(NULL, "\n", &save)) {
		for (dup = 0, i = 0; i < n; i++)
			dup |= strcmp(sites[i], line) == 0;
		if (!dup && *line == '/' && strlen(line) < PATH_MAX)
			strcpy(sites[n++], line);
	}
	if (n == 0)
		patch_say(err, cap, "%s printed no package directory; pass --site-packages DIR",
			 argv[0]);
	return n ? n : -1;
}

/* header - the value of "@key: value" among the first lines of @text, up to
 * the first empty line (a METADATA file's headers), in @out; 0 or -1. */
static int header(const char *text, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key);
	const char *line = text;

	while (*line && *line != '\n') {
		size_t n = strcspn(line, "\r\n");

		if (n > klen && strncmp(line, key, klen) == 0 && line[klen] == ':') {
			const char *v = line + klen + 1;

			while (*v == ' ' || *v == '\t')
				v++;
			snprintf(out, cap, "%.*s", (int)(n - (size_t)(v - line)), v);
			return 0;
		}
		line += n;
		line += *line == '\r';
		line += *line == '\n';
	}
	return -1;
}

/* same_name - distribution names equal as the registry compares them
 * (case-insensitive, '-', '_' and '.' alike). */
static int same_name(const char *a, size_t alen, const char *b)
{
	size_t i;

	if (alen != strlen(b))
		return 0;
	for (i = 0; i < alen; i++) {
		int x = strchr("-_.", a[i]) ? '-' : tolower((unsigned char)a[i]);
		int y = strchr("-_.", b[i]) ? '-' : tolower((unsigned char)b[i]);

		if (x != y)
			return 0;
	}
	return 1;
}

/* patch_find_install - see patch_site.h. */
int patch_find_install(const char *site, const char *fw, struct patch_install *in, char *err,
			size_t cap)
{
	char path[PATH_MAX], name[128], *meta;
	struct dirent *de;
	struct stat st;
	size_t len;
	DIR *d = opendir(site);
	int found = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		const char *dash = strchr(de->d_name, '-');
		size_t n = strlen(de->d_name);

		if (!dash || n < 11 || strcmp(de->d_name + n - 10, ".dist-info") != 0 ||
		    !same_name(de->d_name, (size_t)(dash - de->d_name), fw))
			continue;
		if (found++) {
			patch_say(err, cap, "%s holds two installs of %s (%s, %s): uninstall one "
				 "(pip uninstall %s) and reinstall the one you use", site, fw,
				 in->dist, de->d_name, fw);
			closedir(d);
			return -1;
		}
		snprintf(in->dist, sizeof(in->dist), "%s", de->d_name);
	}
	closedir(d);
	if (!found)
		return 0;
	in->framework = fw;
	meta = patch_pathf(in->site, "%s", site) || patch_pathf(path, "%s/%s/METADATA", site, in->dist) ? (errno = ENAMETOOLONG, NULL)
		: sm_read_small(path, MAX_METADATA_BYTES, &len);
	if (!meta) {
		patch_say(err, cap, "%s: %s; reinstall %s (pip install --force-reinstall --no-deps %s)",
			 path, strerror(errno), fw, fw);
		return -1;
	}
	if (header(meta, "Name", name, sizeof(name)) != 0 || !same_name(name, strlen(name), fw) ||
	    header(meta, "Version", in->version, sizeof(in->version)) != 0 || !in->version[0]) {
		patch_say(err, cap, "%s: no \"Name: %s\" and \"Version:\" header; reinstall %s "
			 "(pip install --force-reinstall --no-deps %s)", path, fw, fw, fw);
		free(meta);
		return -1;
	}
	free(meta);
	if (patch_pathf(path, "%s/%s", site, fw) != 0 || stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		patch_say(err, cap, "%s %s is registered in %s but its package is not there (%s): "
			 "an editable install? apply the patches to its source tree with "
			 "'patch -p1' (patches/%s/)", fw, in->version, site, path, fw);
		return -1;
	}
	return 1;
}

/* patch_patches_dir - see patch_site.h. */
int patch_patches_dir(char *out, char *err, size_t cap)
{
	const char *env = getenv("SM120_PATCHES");
	char exe[PATH_MAX], dir[PATH_MAX], *slash;
	struct stat st;
	ssize_t n;
	int up;

	if (env && *env) {
		if (stat(env, &st) == 0 && S_ISDIR(st.st_mode) && strlen(env) < PATH_MAX) {
			strcpy(out, env);
			return 0;
		}
		patch_say(err, cap, "SM120_PATCHES=%s is not a directory; point it at the "
			 "patches/ directory of sm120-shim", env);
		return -1;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0) {
		patch_say(err, cap, "cannot find the sm120 program (/proc/self/exe: %s); set "
			 "SM120_PATCHES to the patches/ directory", strerror(errno));
		return -1;
	}
	exe[n] = '\0';
	for (up = 0; up < 2; up++) {
		if ((slash = strrchr(exe, '/')))
			*slash = '\0';
		if (up == 0)
			snprintf(dir, sizeof(dir), "%s", exe);
		if (patch_pathf(out, "%s/patches", exe) == 0 && stat(out, &st) == 0 &&
		    S_ISDIR(st.st_mode)) {
			if (realpath(out, dir)) /* messages show it without "/.." */
				patch_pathf(out, "%s", dir);
			return 0;
		}
	}
	patch_say(err, cap, "no patches/ directory beside the sm120 program (%s) or above it; set "
	    "SM120_PATCHES to the patches/ directory of sm120-shim", dir);
	return -1;
}

