/* log.c - see log.h. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/rules/rules.h"


static int log_fd = -1;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
/* What shim_log_setup was told; the strings are the settings' own, immutable. */
static const char *log_path = "";
static const char *summary_limit = "device's";
static const char *summary_mode = "?";
static atomic_ulong outcomes[SHIM_OUTCOMES];
static int open_errno;               /* why the log could not be opened (0: it was, or none) */
static atomic_int write_errno;       /* the first failed write to the log (0: none) */

void shim_log_warn(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n = snprintf(line, sizeof(line), "sm120shim: ");

	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void shim_log_setup(const char *path, const char *limit, const char *mode)
{
	log_path = path;
	summary_limit = limit;
	summary_mode = mode;
}

static void summary(void)
{
	unsigned long n[SHIM_OUTCOMES], total = 0;
	char where[512] = "", library[160] = "";
	int i, werr = atomic_load(&write_errno);

	for (i = 0; i < SHIM_OUTCOMES; i++)
		total += n[i] = atomic_load(&outcomes[i]);
	if (total == 0)
		return;
	/* Point at the log only if it holds the details. */
	if (log_path[0] && log_fd < 0)
		snprintf(where, sizeof(where), "; the log %.300s could not be written (%s), so the "
			 "details are only in the lines above", log_path, strerror(open_errno));
	else if (log_path[0] && werr)
		snprintf(where, sizeof(where), "; details in %.300s, incomplete: a write failed "
			 "(%s)", log_path, strerror(werr));
	else if (log_path[0])
		snprintf(where, sizeof(where), "; details in %.400s", log_path);
	if (n[SHIM_OUTCOME_LIBRARY])
		snprintf(library, sizeof(library), ", %lu passed unchanged as library kernels "
			 "chosen for this GPU's architecture (not %s failures)",
			 n[SHIM_OUTCOME_LIBRARY], summary_limit);
	shim_log_warn("summary: %lu launches or attribute sets over the %s shared-memory limit "
		      "(mode %s): %lu rerouted, %lu refused, %lu only logged, %lu attribute sets "
		      "accepted for rerouting%s%s",
		      total, summary_limit, summary_mode,
		      n[SHIM_OUTCOME_REROUTED], n[SHIM_OUTCOME_REFUSED], n[SHIM_OUTCOME_LOGGED],
		      n[SHIM_OUTCOME_ACCEPTED], library, where);
}

static void log_open(void)
{
	atexit(summary);
	if (!log_path[0])
		return;
	log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (log_fd < 0) {
		open_errno = errno;
		shim_log_warn("cannot open SM120SHIM_LOG '%s' (%s); logging to stderr only",
			      log_path, strerror(open_errno));
	}
}

#define SEEN_SLOTS 4096u
static _Atomic uint64_t seen[SEEN_SLOTS];

int shim_log_first(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a; 0 marks a free slot */
	unsigned int i, n;

	for (; key && *key; key++)
		h = (h ^ (unsigned char)*key) * 0x100000001b3ull;
	h |= 1;
	for (n = 0, i = (unsigned int)(h >> 52) % SEEN_SLOTS; n < SEEN_SLOTS;
	     n++, i = (i + 1) % SEEN_SLOTS) {
		uint64_t cur = 0;

		if (atomic_compare_exchange_strong(&seen[i], &cur, h))
			return 1;
		if (cur == h)
			return 0;
	}
	return 1;
}

void shim_log_count(enum shim_outcome outcome)
{
	pthread_once(&log_once, log_open);
	if ((unsigned)outcome < SHIM_OUTCOMES)
		atomic_fetch_add(&outcomes[outcome], 1);
}

size_t shim_log_json_string(char *out, size_t n, const char *s)
{
	size_t o = 0;

	if (n < 3)
		return 0;
	out[o++] = '"';
	for (; s && *s && o + 8 < n; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20) {
			o += (size_t)snprintf(out + o, n - o, "\\u%04x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
	return o;
}

/* Append ,"key":<string> to @buf. */
static size_t add_str(char *buf, size_t o, size_t n, const char *key, const char *val)
{
	if (!val || o + strlen(key) + 8 >= n)
		return o;
	o += (size_t)snprintf(buf + o, n - o, ",\"%s\":", key);
	return o + shim_log_json_string(buf + o, n - o, val);
}

static size_t add_num(char *buf, size_t o, size_t n, const char *key, int64_t val)
{
	if (val < 0 || o >= n)
		return o;
	o += (size_t)snprintf(buf + o, n - o, ",\"%s\":%lld", key, (long long)val);
	return o < n ? o : n - 1;
}

/*
 * add_whole_str - ,"key":<string> like add_str, but only if all of @val fits:
 * a value cut short would be read back as another one.
 */
static size_t add_whole_str(char *buf, size_t o, size_t n, const char *key, const char *val)
{
	size_t need = strlen(key) + 16;
	const char *c;

	for (c = val; c && *c; c++)
		need += *c == '"' || *c == '\\' ? 2 : (unsigned char)*c < 0x20 ? 6 : 1;
	return val && o + need < n ? add_str(buf, o, n, key, val) : o;
}

/* add_args - ,"args":["0a00000000000000",...]: each parameter's bytes, in memory order. */
static size_t add_args(char *buf, size_t o, size_t n, const struct shim_event *e)
{
	static const char hex[] = "0123456789abcdef";
	size_t need = 12;
	uint32_t i, b;

	for (i = 0; i < e->n_params; i++)
		need += 2 * (size_t)e->params[i].size + 3;
	if (!e->args || !e->n_params || o + need >= n)
		return o; /* all or nothing: a list cut short would not be JSON */
	o += (size_t)snprintf(buf + o, n - o, ",\"args\":[");
	for (i = 0; i < e->n_params; i++) {
		const unsigned char *p = e->args[i];

		if (i)
			buf[o++] = ',';
		buf[o++] = '"';
		for (b = 0; p && b < e->params[i].size; b++) {
			buf[o++] = hex[p[b] >> 4];
			buf[o++] = hex[p[b] & 15];
		}
		buf[o++] = '"';
	}
	buf[o++] = ']';
	return o;
}

/* add_settings - ,"settings":{"page_size":"16"}: the rule settings that are set. */
static size_t add_settings(char *buf, size_t o, size_t n, const char *const *settings)
{
	int i, any = 0;

	for (i = 0; settings && i < RULE_NSETTINGS && o + 8 < n; i++) {
		if (!settings[i] || !settings[i][0])
			continue;
		o += (size_t)snprintf(buf + o, n - o, "%s\"%s\":", any++ ? "," : ",\"settings\":{",
				      rule_setting_names[i]);
		if (o < n)
			o += shim_log_json_string(buf + o, n - o, settings[i]);
	}
	if (any && o + 1 < n)
		buf[o++] = '}';
	return o < n ? o : n - 1;
}

void shim_log_event(const struct shim_event *e)
{
	char buf[8192];
	size_t n = sizeof(buf) - 2, o;
	ssize_t w;
	uint32_t i;

	pthread_once(&log_once, log_open);
	if (log_fd < 0)
		return;
	o = (size_t)snprintf(buf, n, "{\"pid\":%d", (int)getpid());
	o = add_str(buf, o, n, "event", e->event);
	o = add_str(buf, o, n, "level", e->level);
	o = add_str(buf, o, n, "action", e->action);
	o = add_str(buf, o, n, "decision", e->decision);
	o = add_str(buf, o, n, "kernel", e->kernel);
	o = add_str(buf, o, n, "via", e->via);
	o = add_str(buf, o, n, "target", e->target);
	o = add_str(buf, o, n, "mode", e->mode);
	o = add_str(buf, o, n, "origin", e->origin);
	o = add_str(buf, o, n, "image", e->image);
	o = add_str(buf, o, n, "arch", e->arch);
	o = add_str(buf, o, n, "error", e->error);
	o = add_str(buf, o, n, "rule", e->rule);
	o = add_str(buf, o, n, "rerouted_to", e->rerouted_to);
	o = add_str(buf, o, n, "reason", e->reason);
	o = add_str(buf, o, n, "evidence", e->evidence);
	o = add_str(buf, o, n, "device", e->device);
	o = add_str(buf, o, n, "image_codes", e->image_codes);
	o = add_str(buf, o, n, "image_file", e->image_file);
	o = add_str(buf, o, n, "loader", e->loader);
	o = add_str(buf, o, n, "loader_codes", e->loader_codes);
	if (e->runtime_compiled && o + 32 < n)
		o += (size_t)snprintf(buf + o, n - o, ",\"runtime_compiled\":true");
	o = add_num(buf, o, n, "static_smem", e->static_smem);
	o = add_num(buf, o, n, "dynamic_smem", e->dynamic_smem);
	o = add_num(buf, o, n, "limit", e->limit);
	o = add_num(buf, o, n, "kernels", e->kernels);
	o = add_num(buf, o, n, "regs", e->regs);
	o = add_num(buf, o, n, "param_bytes", e->param_bytes);
	if (e->sms > 0)
		o = add_num(buf, o, n, "sms", e->sms);
	for (i = 0; i < e->n_params && o + 24 < n; i++)
		o += (size_t)snprintf(buf + o, n - o, "%s%u", i ? "," : ",\"param_sizes\":[",
				      e->params[i].size);
	if (i)
		buf[o++] = ']';
	o = add_args(buf, o, n, e);
	o = add_settings(buf, o, n, e->settings);
	if (e->pad && o + 160 < n)
		o += (size_t)snprintf(buf + o, n - o, ",\"occupancy_pad\":{\"from\":%lld,\"to\":%lld,"
				      "\"blocks\":%u,\"target_blocks\":%u,\"device_blocks\":%u}",
				      (long long)e->pad->from, (long long)e->pad->to, e->pad->blocks,
				      e->pad->target_blocks, e->pad->device_blocks);
	if (e->grid[0] && o < n)
		o += (size_t)snprintf(buf + o, n - o, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]",
				      e->grid[0], e->grid[1], e->grid[2], e->block[0], e->block[1],
				      e->block[2]);
	if (o < n)
		o = add_whole_str(buf, o, n, "compiled", e->compiled);
	if (o > n)
		o = n;
	buf[o++] = '}';
	buf[o++] = '\n';
	w = write(log_fd, buf, o);
	if (w != (ssize_t)o) {
		int expected = 0;

		/* A short write sets no errno: the disk is full. */
		atomic_compare_exchange_strong(&write_errno, &expected, w < 0 ? errno : ENOSPC);
	}
}
