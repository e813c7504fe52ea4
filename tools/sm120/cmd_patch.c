/*
 * cmd_patch.c - `sm120 patch check|apply|revert`: our source patches for an
 * installed SGLang or vLLM, the alternative to preloading the shim.
 *
 *   sm120 patch check  [--framework sglang|vllm] [--site-packages DIR]
 *   sm120 patch apply  [...]
 *   sm120 patch revert [...]
 *   sm120 patch configs --model DIR --tp N [...]   (cmd_patch_configs.c)
 *
 * The installed release is read from its package metadata
 * (DIR/<name>-<version>.dist-info/METADATA); without --site-packages, DIR is
 * each of the purelib and platlib directories of the Python on PATH
 * ($PYTHON, else python3).  The patch set is patches/<framework>/<line>/,
 * where the release line <line> is the installed version or a prefix of it
 * ending at a '.' or '+' (0.33 takes 0.33.0 and 0.33.1; the longest wins).
 * The patches directory is $SM120_PATCHES, else patches/ beside the sm120
 * program or one directory above it (build/sm120 in a source tree).
 *
 * Each *.patch is a unified diff of one file, relative to site-packages
 * with one leading component (a/ b/), after a header of '#' lines, of which
 * "# Fixes:" and "# Upstream:" are shown (patches/README.md).  GNU patch does
 * the work, exactly (no fuzz):
 *   - a file is "to apply" when the patch applies to it and it has no backup;
 *   - "applied" when FILE.sm120-orig exists and that backup plus the patch is
 *     byte for byte FILE;
 *   - anything else is refused and named: the file is missing, already holds
 *     the change without our backup, differs from what the patch expects
 *     (edited by hand, another build), or changed since we patched it.
 * apply backs each file up (FILE.sm120-orig, its mode and times kept) and
 * replaces it by the patched copy in one rename; it changes nothing when any
 * patch of the set is refused, and undoes its own changes if writing fails
 * half way.  revert renames each backup back: the original, byte for byte.
 *
 * Exit: 0 done or nothing to do, 1 something refused (no patch set for the
 * version, a file not recognised, a file that cannot be written), 2 usage
 * or bad input (no framework found, a malformed patch set).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/common/file.h"
#include "commands.h"
#include "patch_site.h"

#define MAX_PATCHES 64
#define MAX_PATCH_BYTES (1u << 20)
#define MAX_SOURCE_BYTES (64u << 20)
#define BACKUP_SUFFIX ".sm120-orig"
#define PATCH_PROGRAM "patch"

/* The frameworks sm120 patch knows: distribution name = import package name. */
static const char *const frameworks[] = { "sglang", "vllm" };
#define NFRAMEWORKS (sizeof(frameworks) / sizeof(frameworks[0]))

enum action { CHECK, APPLY, REVERT };

/* What one patch finds in the installed file; one row per state below. */
enum state {
	ST_PENDING,       /* the patch applies, no backup: apply would change the file */
	ST_APPLIED,       /* backup + patch == file: apply did it */
	ST_NO_FILE,       /* the file is missing */
	ST_NOT_REGULAR,   /* a symbolic link or other non-regular file */
	ST_ELSEWHERE,     /* already holds the change, but there is no backup of ours */
	ST_MISMATCH,      /* neither the patch nor its reverse applies */
	ST_CHANGED_SINCE, /* a backup exists but the file is not backup + patch */
};

/* Which actions a state stops: check and apply refuse every state but the
 * two they know; revert only what restoring the backup would lose. */
static const struct state_info {
	int refused_by_apply;
	int refused_by_revert;
} states[] = {
	[ST_PENDING] = { 0, 0 },       /* revert: nothing of ours to restore */
	[ST_APPLIED] = { 0, 0 },
	[ST_NO_FILE] = { 1, 0 },
	[ST_NOT_REGULAR] = { 1, 1 },
	[ST_ELSEWHERE] = { 1, 0 },
	[ST_MISMATCH] = { 1, 0 },
	[ST_CHANGED_SINCE] = { 1, 1 },
};

/* One patch of the set and what it finds. */
struct patch {
	char name[NAME_MAX + 1]; /* extend-attention.patch */
	char path[PATH_MAX];     /* the .patch file */
	char target[PATH_MAX];   /* the file it changes, relative to site-packages */
	char file[PATH_MAX];     /* site-packages/target */
	char backup[PATH_MAX];   /* file + BACKUP_SUFFIX */
	char fixes[512], upstream[512];
	char *text; /* the whole .patch */
	enum state state;
	char why[512]; /* the first line GNU patch printed, when it refused */
	int done;      /* this run applied or reverted it */
};

/* fail - the message, as patch_fail says it for this command; returns @code. */
#define fail(code, ...) patch_fail("sm120 patch", code, __VA_ARGS__)

static int usage(FILE *out, int code)
{
	fprintf(out,
		"usage: sm120 patch check|apply|revert [--framework sglang|vllm] [--site-packages DIR]\n"
		"  check   say what apply would change in the installed SGLang / vLLM, and why\n"
		"  apply   apply our SM120 patches for its release (backup: FILE" BACKUP_SUFFIX ")\n"
		"  revert  put the backed-up originals back\n"
		"  configs write our SM120 fused-MoE config tables for a model where the framework\n"
		"          reads them ('sm120 patch configs --help')\n"
		"  --framework       only this one (default: every one installed)\n"
		"  --site-packages   where it is installed (default: the purelib and platlib\n"
		"                    directories of $PYTHON, else python3)\n"
		"patches: $SM120_PATCHES, else patches/ beside the sm120 program or above it\n"
		"exit: 0 done or nothing to do, 1 something refused, 2 usage or bad input\n");
	return code;
}

/* first_line - @text up to its first newline, in @out (@cap bytes). */
static void first_line(const char *text, char *out, size_t cap)
{
	size_t n = strcspn(text, "\n");

	snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), text);
}

enum patch_mode { FORWARD_DRY, REVERSE_DRY, WRITE };

/*
 * gnu_patch - GNU patch on one file, exactly (no fuzz, never asking, never
 * guessing a reversed patch): @mode FORWARD_DRY / REVERSE_DRY only test
 * whether @p applies to @file forwards / backwards; WRITE writes @file
 * patched to @out.  Returns 0 when it applies; 1 with @p->why holding what
 * patch said; -errno when patch cannot be run.
 */
static int gnu_patch(struct patch *p, const char *file, enum patch_mode mode, const char *out)
{
	char *argv[16], msg[1024];
	int n = 0, rc;

	argv[n++] = PATCH_PROGRAM;
	argv[n++] = "--force";
	argv[n++] = "--fuzz=0";
	argv[n++] = "--silent";
	argv[n++] = "--reject-file=-";
	argv[n++] = "--no-backup-if-mismatch";
	if (mode == REVERSE_DRY)
		argv[n++] = "--reverse";
	if (mode == WRITE) {
		argv[n++] = "--output";
		argv[n++] = (char *)out;
	} else {
		argv[n++] = "--dry-run";
	}
	argv[n++] = "--input";
	argv[n++] = p->path;
	argv[n++] = (char *)file;
	argv[n] = NULL;
	rc = patch_run(argv, msg, sizeof(msg));
	if (rc < 0)
		return rc;
	if (rc != 0)
		first_line(msg[0] ? msg : "no message", p->why, sizeof(p->why));
	return rc == 0 ? 0 : 1;
}

/* ------------------------------------------------------------ patch set */

/* by_version - qsort order of release line names: 0.5.8 < 0.5.9 < 0.5.23. */
static int by_version(const void *a, const void *b)
{
	return strverscmp(a, b);
}

/* line_matches - release line @line covers @version: equal, or a prefix
 * ending where the version has a '.' or '+'. */
static int line_matches(const char *line, const char *version)
{
	size_t n = strlen(line);

	return strncmp(line, version, n) == 0 &&
	       (version[n] == '\0' || version[n] == '.' || version[n] == '+');
}

/*
 * pick_set - the patch set for @in in @in->set: the longest release line
 * under @root/<framework>/ that covers the version.  0, or 1 with @err
 * naming the version and the lines there are.
 */
static int pick_set(const char *root, struct patch_install *in, char *err, size_t cap)
{
	char dir[PATH_MAX], lines[32][NAME_MAX + 1], have[512] = "";
	const char *best = NULL;
	struct dirent *de;
	size_t n = 0, i, at = 0;
	DIR *d;

	d = patch_pathf(dir, "%s/%s", root, in->framework) == 0 ? opendir(dir) : NULL;
	while (d && (de = readdir(d)) && n < 32)
		if (de->d_name[0] != '.')
			snprintf(lines[n++], sizeof(lines[0]), "%s", de->d_name);
	if (d)
		closedir(d);
	qsort(lines, n, sizeof(lines[0]), by_version);
	for (i = 0; i < n; i++) {
		if (line_matches(lines[i], in->version) && (!best || strlen(lines[i]) > strlen(best)))
			best = lines[i];
		if (at < sizeof(have))
			at += (size_t)snprintf(have + at, sizeof(have) - at, "%s%s", i ? ", " : "",
					       lines[i]);
	}
	if (!best) {
		patch_say(err, cap, "%s %s (%s/%s) is a version sm120 patch does not know: %s has "
		    "patch sets for %s only; install one of those releases, or run the "
		    "unmodified %s under the shim (sm120 run)", in->framework, in->version,
		    in->site, in->dist, dir, n ? have : "no release", in->framework);
		return 1;
	}
	if (patch_pathf(in->set, "%s/%s", dir, best) != 0) {
		patch_say(err, cap, "%s/%s: path too long", dir, best);
		return 1;
	}
	return 0;
}

/*
 * parse_patch - read @p->path: its "# Fixes:" and "# Upstream:" lines and
 * the one file it changes ("+++ b/<framework>/..."), which must stay inside
 * the framework's package.  0, or -1 with @err naming the file and what is
 * wrong.
 */
static int parse_patch(struct patch *p, const char *fw, char *err, size_t cap)
{
	const char *line;
	size_t len, n, fwlen = strlen(fw);
	int targets = 0, after_minus = 0; /* the line before was a "--- " file line */

	p->text = sm_read_small(p->path, MAX_PATCH_BYTES, &len);
	if (!p->text) {
		patch_say(err, cap, "%s: %s", p->path, strerror(errno));
		return -1;
	}
	for (line = p->text; *line; after_minus = strncmp(line, "--- ", 4) == 0,
				     line += n + (line[n] == '\n')) {
		n = strcspn(line, "\n");
		if (strncmp(line, "# Fixes:", 8) == 0)
			snprintf(p->fixes, sizeof(p->fixes), "%.*s", (int)(n - 8), line + 8);
		else if (strncmp(line, "# Upstream:", 11) == 0)
			snprintf(p->upstream, sizeof(p->upstream), "%.*s", (int)(n - 11),
				 line + 11);
		else if (strncmp(line, "+++ ", 4) == 0 && after_minus) {
			size_t m = strcspn(line + 4, "\t\n");
			const char *t = line + 4, *slash = memchr(t, '/', m);

			targets++;
			if (slash) {
				m -= (size_t)(slash + 1 - t);
				t = slash + 1;
			}
			snprintf(p->target, sizeof(p->target), "%.*s", (int)m, t);
		}
	}
	if (targets != 1 || !p->fixes[0] || !p->upstream[0]) {
		patch_say(err, cap, "%s: malformed: a patch here is a header with \"# Fixes:\" and "
			 "\"# Upstream:\" lines and a unified diff of exactly one file (%d found); "
			 "see patches/README.md", p->path, targets);
		return -1;
	}
	if (strncmp(p->target, fw, fwlen) != 0 || p->target[fwlen] != '/' ||
	    strstr(p->target, "/../") || strstr(p->target, "//")) {
		patch_say(err, cap, "%s: changes '%s', which is not a file of the %s package "
			 "(b/%s/...); fix the patch", p->path, p->target, fw, fw);
		return -1;
	}
	memmove(p->fixes, p->fixes + (p->fixes[0] == ' '), strlen(p->fixes));
	memmove(p->upstream, p->upstream + (p->upstream[0] == ' '), strlen(p->upstream));
	return 0;
}

/* free_set - the texts of the @n patches of @ps. */
static void free_set(struct patch *ps, int n)
{
	while (n-- > 0)
		free(ps[n].text);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct patch *)a)->name, ((const struct patch *)b)->name);
}

/*
 * load_set - every *.patch of @in->set, sorted by name, parsed, in @ps
 * (MAX_PATCHES); their number, or -1 with @err (a malformed patch, two
 * patches of one file, an empty set).
 */
static int load_set(const struct patch_install *in, struct patch *ps, char *err, size_t cap)
{
	struct dirent *de;
	DIR *d = opendir(in->set);
	int n = 0, i, j;

	if (!d) {
		patch_say(err, cap, "%s: %s", in->set, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len < 7 || strcmp(de->d_name + len - 6, ".patch") != 0)
			continue;
		if (n == MAX_PATCHES) {
			patch_say(err, cap, "%s: more than %d patches", in->set, MAX_PATCHES);
			closedir(d);
			return -1;
		}
		memset(&ps[n], 0, sizeof(ps[n]));
		snprintf(ps[n].name, sizeof(ps[n].name), "%s", de->d_name);
		if (patch_pathf(ps[n].path, "%s/%s", in->set, de->d_name) != 0) {
			patch_say(err, cap, "%s/%s: path too long", in->set, de->d_name);
			closedir(d);
			return -1;
		}
		n++;
	}
	closedir(d);
	qsort(ps, (size_t)n, sizeof(ps[0]), by_name);
	for (i = 0; i < n; i++) {
		if (parse_patch(&ps[i], in->framework, err, cap) != 0) {
			free_set(ps, n);
			return -1;
		}
		if (patch_pathf(ps[i].file, "%s/%s", in->site, ps[i].target) != 0 ||
		    patch_pathf(ps[i].backup, "%s" BACKUP_SUFFIX, ps[i].file) != 0) {
			patch_say(err, cap, "%s/%s: path too long", in->site, ps[i].target);
			free_set(ps, n);
			return -1;
		}
		for (j = 0; j < i; j++)
			if (strcmp(ps[i].target, ps[j].target) == 0) {
				patch_say(err, cap, "%s and %s both change %s: one patch per file",
					 ps[j].path, ps[i].path, ps[i].target);
				free_set(ps, n);
				return -1;
			}
	}
	if (n == 0)
		patch_say(err, cap, "%s holds no *.patch", in->set);
	return n ? n : -1;
}

/* ------------------------------------------------------------ one patch */

/* same_bytes - the files at @a and @b hold the same bytes: 1, 0, or -errno. */
static int same_bytes(const char *a, const char *b)
{
	size_t na, nb;
	char *x = sm_read_small(a, MAX_SOURCE_BYTES, &na), *y;
	int rc;

	if (!x)
		return -errno;
	y = sm_read_small(b, MAX_SOURCE_BYTES, &nb);
	rc = !y ? -errno : na == nb && memcmp(x, y, na) == 0;
	free(x);
	free(y);
	return rc;
}

/*
 * temp_beside - a new empty file next to @path (same directory: a rename
 * replaces @path in one step), its name in @out.  0 or -errno.
 */
static int temp_beside(const char *path, char *out)
{
	const char *slash = strrchr(path, '/');
	int fd;

	if (patch_pathf(out, "%.*s.%s.sm120-new.XXXXXX", (int)(slash + 1 - path), path, slash + 1))
		return -ENAMETOOLONG;
	fd = mkostemp(out, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* temp_file - a new empty file in $TMPDIR (else /tmp), its name in @out: 0 or -errno. */
static int temp_file(char *out)
{
	const char *t = getenv("TMPDIR");
	int fd;

	if (patch_pathf(out, "%s/sm120-patch.XXXXXX", t && *t ? t : "/tmp") != 0)
		return -ENAMETOOLONG;
	fd = mkostemp(out, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/*
 * assess - what @p finds in the install at @p->file (sets @p->state, and
 * @p->why when GNU patch refused); writes nothing in the install.  0, or
 * -errno when GNU patch cannot be run or a temporary file cannot be made.
 */
static int assess(struct patch *p)
{
	char tmp[PATH_MAX];
	struct stat st, bst;
	int rc, have_backup = lstat(p->backup, &bst) == 0;

	p->why[0] = '\0';
	if (lstat(p->file, &st) != 0) {
		p->state = have_backup ? ST_CHANGED_SINCE : ST_NO_FILE;
		return 0;
	}
	if (!S_ISREG(st.st_mode) || (have_backup && !S_ISREG(bst.st_mode))) {
		p->state = ST_NOT_REGULAR;
		return 0;
	}
	if (have_backup) {
		/* Applied by us exactly when the backup, patched, is the file. */
		if ((rc = temp_file(tmp)) != 0)
			return rc;
		rc = gnu_patch(p, p->backup, WRITE, tmp);
		if (rc == 0)
			rc = same_bytes(tmp, p->file);
		else if (rc > 0)
			rc = 0;
		unlink(tmp);
		if (rc < 0)
			return rc;
		p->state = rc == 1 ? ST_APPLIED : ST_CHANGED_SINCE;
		return 0;
	}
	if ((rc = gnu_patch(p, p->file, FORWARD_DRY, NULL)) <= 0) {
		p->state = ST_PENDING;
		return rc;
	}
	rc = gnu_patch(p, p->file, REVERSE_DRY, NULL);
	if (rc < 0)
		return rc;
	p->state = rc == 0 ? ST_ELSEWHERE : ST_MISMATCH;
	return 0;
}

/* refusal - why @p (a refused state) is refused and what to do, for @in. */
static void refusal(const struct patch_install *in, const struct patch *p, char *out, size_t cap)
{
	switch (p->state) {
	case ST_NO_FILE:
		patch_say(out, cap, "%s is missing: not a complete %s %s install; reinstall it "
			 "(pip install --force-reinstall --no-deps %s==%s)", p->file, in->framework,
			 in->version, in->framework, in->version);
		break;
	case ST_NOT_REGULAR:
		patch_say(out, cap, "%s or its backup %s is not a regular file (a symbolic link?); "
			 "patch the installed files themselves: --site-packages DIR", p->file,
			 p->backup);
		break;
	case ST_ELSEWHERE:
		patch_say(out, cap, "%s already holds this change, but not from 'sm120 patch "
			 "apply' (no backup %s): patched by hand; nothing to do, or reinstall "
			 "%s %s to start from the release", p->file, p->backup, in->framework,
			 in->version);
		break;
	case ST_MISMATCH:
		patch_say(out, cap, "%s does not match what the patch expects (patch: %s): edited "
			 "by hand, or another build of %s %s; reinstall it (pip install "
			 "--force-reinstall --no-deps %s==%s) and retry", p->file, p->why,
			 in->framework, in->version, in->framework, in->version);
		break;
	case ST_CHANGED_SINCE:
		patch_say(out, cap, "%s changed since 'sm120 patch apply' (it is no longer its "
			 "backup %s plus this patch): changed by hand or by a reinstall; to "
			 "keep the file as it is, delete the backup; to return to the original, "
			 "mv %s %s", p->file, p->backup, p->backup, p->file);
		break;
	default:
		out[0] = '\0';
	}
}

/* show_diff - the lines @p removes and adds, with the line each hunk starts at. */
static void show_diff(const struct patch *p)
{
	const char *line, *body = strstr(p->text, "\n+++ ");
	size_t n;

	if (!body)
		return;
	body = strchr(body + 1, '\n');
	for (line = body ? body + 1 : ""; *line; line += n + (line[n] == '\n')) {
		n = strcspn(line, "\n");
		if (strncmp(line, "@@ -", 4) == 0)
			printf("      at line %ld:\n", strtol(line + 4, NULL, 10));
		else if (line[0] == '-' || line[0] == '+')
			printf("      %.*s\n", (int)n, line);
	}
}

/* copy_as_backup - @p->file copied to @p->backup (created, never replaced),
 * with the file's mode, times and (as root) owner.  0, or -errno. */
static int copy_as_backup(const struct patch *p, const struct stat *st)
{
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	size_t len, off = 0;
	char *data = sm_read_small(p->file, MAX_SOURCE_BYTES, &len);
	int fd, e = 0;

	if (!data)
		return -errno;
	fd = open(p->backup, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  st->st_mode & 07777);
	if (fd < 0) {
		e = errno;
		free(data);
		return -e;
	}
	while (!e && off < len) {
		ssize_t w = write(fd, data + off, len - off);

		if (w < 0 && errno != EINTR)
			e = errno;
		off += w > 0 ? (size_t)w : 0;
	}
	if (!e && geteuid() == 0 && fchown(fd, st->st_uid, st->st_gid) != 0)
		e = errno;
	if (!e && (fsync(fd) != 0 || futimens(fd, times) != 0))
		e = errno;
	if (close(fd) != 0 && !e)
		e = errno;
	free(data);
	if (e)
		unlink(p->backup);
	return -e;
}

/*
 * apply_one - back @p->file up and replace it by its patched copy in one
 * rename.  0, or 1 with @err naming the file, the step and the fix.
 */
static int apply_one(struct patch *p, char *err, size_t cap)
{
	char tmp[PATH_MAX];
	struct stat st;
	int rc;

	if (stat(p->file, &st) != 0 || (rc = temp_beside(p->file, tmp)) != 0) {
		patch_say(err, cap, "cannot write beside %s (%s): run as the owner of %s", p->file,
			 strerror(errno), p->file);
		return 1;
	}
	rc = gnu_patch(p, p->file, WRITE, tmp);
	if (rc != 0) {
		unlink(tmp);
		patch_say(err, cap, "GNU patch failed on %s (%s)", p->file,
			 rc < 0 ? strerror(-rc) : p->why);
		return 1;
	}
	if ((rc = copy_as_backup(p, &st)) != 0) {
		unlink(tmp);
		patch_say(err, cap, "cannot write the backup %s (%s): run as the owner of %s",
			 p->backup, strerror(-rc), p->file);
		return 1;
	}
	if (chmod(tmp, st.st_mode & 07777) != 0 ||
	    (geteuid() == 0 && chown(tmp, st.st_uid, st.st_gid) != 0) || rename(tmp, p->file) != 0) {
		rc = errno;
		unlink(tmp);
		unlink(p->backup);
		patch_say(err, cap, "cannot replace %s (%s): run as its owner", p->file,
			 strerror(rc));
		return 1;
	}
	return 0;
}

/* ----------------------------------------------------------- the command */

/* refused_by - @action cannot go on with @p as it is (states[]). */
static int refused_by(enum action action, const struct patch *p)
{
	return action == REVERT ? states[p->state].refused_by_revert
				: states[p->state].refused_by_apply;
}

/* report - the line(s) saying what @action did or would do with @p. */
static void report(enum action action, const struct patch_install *in, const struct patch *p)
{
	char why[1536];

	if (refused_by(action, p)) {
		refusal(in, p, why, sizeof(why));
		printf("  %s: refused: %s\n", p->name, why);
	} else if (p->done) {
		printf("  %s: %s %s\n", p->name, action == APPLY ? "patched" : "restored", p->file);
	} else if (action == REVERT && p->state == ST_APPLIED) {
		printf("  %s: not restored: %s (backup %s kept)\n", p->name, p->target, p->backup);
	} else if (action == REVERT) {
		printf("  %s: nothing to revert in %s (no backup of ours)\n", p->name, p->target);
	} else if (p->state == ST_APPLIED) {
		printf("  %s: already applied to %s (original in %s)\n", p->name, p->target, p->backup);
	} else {
		printf("  %s: %s %s\n    why: %s\n    upstream: %s\n", p->name,
		       action == CHECK ? "would change" : "not changed:", p->target, p->fixes,
		       p->upstream);
		if (action == CHECK)
			show_diff(p);
	}
}

/*
 * do_set - @action on the patch set of @in: assess every patch, refuse
 * them all if one is refused, else act.  Prints one line per patch (check
 * also the lines each would change) and a summary; returns the exit status.
 */
static int do_set(enum action action, const struct patch_install *in)
{
	static struct patch ps[MAX_PATCHES];
	char err[1024];
	int n, i, rc = 0, refused = 0, todo = 0, done = 0;

	n = load_set(in, ps, err, sizeof(err));
	if (n < 0)
		return fail(2, "%s", err);
	printf("%s %s in %s (%s); patch set %s: %d patch%s\n", in->framework, in->version,
	       in->site, in->dist, in->set, n, n == 1 ? "" : "es");
	for (i = 0; i < n; i++) {
		if ((rc = assess(&ps[i])) != 0) {
			fail(1, "cannot run GNU patch on %s (%s): install it (apt-get install patch)",
			     ps[i].file, strerror(-rc));
			free_set(ps, n);
			return 1;
		}
		refused += refused_by(action, &ps[i]);
		todo += ps[i].state == (action == REVERT ? ST_APPLIED : ST_PENDING);
	}
	err[0] = '\0';
	if (!refused && action != CHECK) {
		for (i = 0; i < n && rc == 0; i++) {
			struct patch *p = &ps[i];

			if (p->state != (action == APPLY ? ST_PENDING : ST_APPLIED))
				continue;
			if (action == APPLY) {
				rc = apply_one(p, err, sizeof(err));
			} else if (rename(p->backup, p->file) != 0) {
				patch_say(err, sizeof(err), "cannot restore %s from %s (%s): run as "
					 "the owner of %s; 'sm120 patch revert' again restores the "
					 "rest", p->file, p->backup, strerror(errno), p->file);
				rc = 1;
			}
			p->done = rc == 0;
			done += p->done;
		}
		/* A half-done apply is undone: the install is as it was. */
		for (i = 0; rc != 0 && action == APPLY && i < n; i++)
			if (ps[i].done && rename(ps[i].backup, ps[i].file) == 0)
				ps[i].done = 0;
	}
	for (i = 0; i < n; i++)
		report(action, in, &ps[i]);
	if (rc != 0)
		fail(1, "%s", err);
	if (refused)
		printf("%s: %d refused; %s\n", action == CHECK ? "check" : "nothing changed", refused,
		       action == CHECK ? "'sm120 patch apply' would change nothing"
				       : "resolve each one and retry");
	else if (action == CHECK)
		printf("check: %d to apply, %d applied%s; the sites this release does not need: "
		       "%s/README.md\n", todo, n - todo,
		       todo ? " ('sm120 patch apply' applies them)" : "", in->set);
	else if (rc == 0)
		printf("%s: %s\n", action == APPLY ? "apply" : "revert",
		       !done ? "nothing to do" : action == APPLY ?
		       "done; each original is kept as FILE" BACKUP_SUFFIX : "done; the release's "
		       "original files are back");
	free_set(ps, n);
	return rc != 0 || refused ? 1 : 0;
}

int cmd_patch(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "framework", required_argument, NULL, 'f' },
		{ "site-packages", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const actions[] = { [CHECK] = "check", [APPLY] = "apply",
					       [REVERT] = "revert" };
	char sites[PATCH_MAX_SITES][PATH_MAX], root[PATH_MAX], err[2048];
	const char *only = NULL, *site = NULL, *python = NULL;
	struct patch_install in;
	int action = -1, nsites, i, c, rc = 0, any = 0;
	size_t f;

	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return usage(stdout, 0);
	if (argc >= 2 && strcmp(argv[1], "configs") == 0)
		return patch_configs(argc - 1, argv + 1);
	for (i = 0; argc >= 2 && i < 3; i++)
		if (strcmp(argv[1], actions[i]) == 0)
			action = i;
	if (action < 0)
		return argc >= 2 ? fail(2, "unknown action '%s': check, apply, revert or configs", argv[1])
				 : usage(stderr, 2);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, ":h", opts, NULL)) != -1) {
		if (c == 'f')
			only = optarg;
		else if (c == 's')
			site = optarg;
		else if (c == 'h')
			return usage(stdout, 0);
		else /* argv + 1 was parsed: its optind - 1 is argv's optind */
			return fail(2, "%s '%s'; 'sm120 patch --help' shows the usage",
				    c == ':' ? "a value is missing after" : "unknown option",
				    argv[optind]);
	}
	if (optind != argc - 1)
		return fail(2, "unexpected argument '%s'; 'sm120 patch --help' shows the usage",
			    argv[optind + 1]);
	for (f = 0; only && f < NFRAMEWORKS && strcmp(only, frameworks[f]) != 0; f++)
		;
	if (only && f == NFRAMEWORKS)
		return fail(2, "--framework %s: sm120 patch knows sglang and vllm", only);
	if (site) {
		struct stat st;

		if (stat(site, &st) != 0 || !S_ISDIR(st.st_mode) || strlen(site) >= PATH_MAX)
			return fail(2, "--site-packages %s: not a directory; pass the site-packages "
				    "directory the framework is installed in", site);
		strcpy(sites[0], site);
		nsites = 1;
	} else if ((nsites = patch_python_sites(sites, &python, err, sizeof(err))) < 0) {
		return fail(2, "%s", err);
	}
	if (patch_patches_dir(root, err, sizeof(err)) != 0)
		return fail(2, "%s", err);
	for (f = 0; f < NFRAMEWORKS; f++) {
		int found = 0, r;

		if (only && strcmp(only, frameworks[f]) != 0)
			continue;
		for (i = 0; i < nsites && !found; i++) {
			memset(&in, 0, sizeof(in));
			found = patch_find_install(sites[i], frameworks[f], &in, err, sizeof(err));
		}
		if (found < 0) {
			r = fail(2, "%s", err);
		} else if (!found) {
			continue;
		} else if (pick_set(root, &in, err, sizeof(err)) != 0) {
			r = fail(1, "%s", err);
		} else {
			r = do_set((enum action)action, &in);
		}
		any = 1;
		rc = r > rc ? r : rc;
	}
	if (!any) {
		size_t n = 0;

		err[0] = '\0';
		for (i = 0; i < nsites && n < sizeof(err); i++)
			n += (size_t)snprintf(err + n, sizeof(err) - n, "%s%s", i ? ", " : "",
					      sites[i]);
		return fail(2, "no %s installed in %s (%s: no %s-*.dist-info there); pass "
			    "--site-packages DIR, the directory that holds it", only ? only :
			    "SGLang or vLLM", err, site ? "--site-packages" : python,
			    only ? only : "sglang-*.dist-info or vllm");
	}
	return rc;
}
