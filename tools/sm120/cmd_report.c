/*
 * cmd_report.c - `sm120 report`: tables from the shim's JSON-lines logs.
 *
 * Reads the files SM120SHIM_LOG produced (one per process, or one shared by
 * several) and prints one row per kernel name, worst first, ranked by what
 * its launches needed: the most shared memory one launch asked, then most
 * events.  An attribute set is what a kernel was allowed, not what it needs
 * (Triton sets the device's whole opt-in for every kernel over 48 KiB), so a
 * kernel known only from attribute sets is listed apart, "allowed, never
 * launched over the limit", and is no failure.  Kernels the shim passed as a
 * library's choice for the device's architecture (action "library", under
 * an emulated target) are listed apart with their evidence, and are no
 * failure either.  Module loads are counted apart.  Memory grows with the
 * number of distinct kernels and processes, never with the number of lines.
 * Exit status: 0 no launch over its limit, 1 some over, 2 a file or line
 * could not be read (reported, skipped, the rest is read).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "jsonl.h"

#define NAME_WIDTH 72   /* KERNEL column: head "..." tail beyond this */
#define NAME_TAIL 19

/* Per-process flags in the pid set. */
enum { PID_SEEN = 1, PID_OVER = 2, PID_LOADED = 4 };

/* An open-addressing set of non-zero 64-bit keys, each with a flag byte. */
struct u64set {
	uint64_t *key;
	unsigned char *flags;
	size_t cap, n;
};

/* The classes of a kernel's events, each with its own worst event. */
enum worst_class {
	WORST_NEED = 0,      /* launches judged against the limit: what the kernel needs */
	WORST_ALLOWED,       /* attribute sets judged against it: what it was allowed */
	WORST_LIB_NEED,      /* launches passed as a library's (action "library") */
	WORST_LIB_ALLOWED,   /* attribute sets passed as a library's */
	WORST_CLASSES
};

/* The event of one class that asked the most bytes. */
struct worst {
	int64_t bytes;           /* static + dynamic; -1 none */
	int64_t static_smem, dynamic_smem, limit; /* of that event; -1 unknown */
	char target[32];
	char via[64];
};

struct kstat {
	char *name;
	char *origin;            /* first origin logged, or NULL */
	char *evidence;          /* first library evidence logged, or NULL */
	struct worst worst[WORST_CLASSES];
	int64_t over;            /* largest total - limit of one judged launch; INT64_MIN none */
	char first_target[32];
	int mixed_targets;
	/* judged events (not "library") by kind and action */
	unsigned long events, launches, sets, refused, logged, accepted, rerouted, passed;
	unsigned long lib_events, lib_launches, procs;
};

struct report {
	int json;
	struct kstat *k;
	size_t nk, capk;
	uint32_t *slot;          /* kernel index + 1; 0 empty */
	size_t nslot;
	struct u64set pids, pairs; /* pids; (kernel, pid) pairs */
	char target[32];         /* the kernels' target, if only one */
	int targets;             /* 0 none seen, 1 one, 2 several */
	unsigned long loads, loaded_kernels;
	struct jsonl_counts io;
};

static const char *usage_text =
	"usage: sm120 report [--json] LOG...\n"
	"\n"
	"LOG: a JSON-lines file written by the shim (SM120SHIM_LOG, one per process),\n"
	"     or - for standard input.\n"
	"One row per launched kernel, worst first (most bytes a launch needed, then\n"
	"most events):\n"
	"  BYTES     the most static + dynamic shared memory one launch needed\n"
	"  LIMIT     the target's opt-in bytes per block; OVER: bytes above it\n"
	"  LAUNCHES  launch events; EVENTS: all of its events (attribute sets too)\n"
	"  REFUSED, LOGGED, ACCEPTED, REROUTED: events by the shim's action\n"
	"  PROCS     distinct processes that logged it\n"
	"Then, apart and not counted as failures: kernels only allowed more than the\n"
	"limit by an attribute set (ALLOWED: the most set) and never launched over it,\n"
	"and library kernels, chosen by a library for the device's architecture under\n"
	"an emulated target (NEEDS, ALLOWED; each with the shim's evidence).\n"
	"  --json    one JSON object per kernel (full names; \"type\": \"kernel\",\n"
	"            \"allowed\" or \"library\"), then a summary object\n"
	"exit: 0 no launch over its limit, 1 some over, 2 unreadable file or line\n";

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static int set_grow(struct u64set *s)
{
	size_t cap = s->cap ? s->cap * 2 : 64, i, j;
	uint64_t *key = calloc(cap, sizeof(*key));
	unsigned char *flags = calloc(cap, 1);

	if (!key || !flags) {
		free(key);
		free(flags);
		return -ENOMEM;
	}
	for (i = 0; i < s->cap; i++) {
		if (!s->key[i])
			continue;
		for (j = mix64(s->key[i]) & (cap - 1); key[j]; j = (j + 1) & (cap - 1))
			;
		key[j] = s->key[i];
		flags[j] = s->flags[i];
	}
	free(s->key);
	free(s->flags);
	s->key = key;
	s->flags = flags;
	s->cap = cap;
	return 0;
}

/* Add @key (non-zero) with @flags OR-ed in; 1 if it was new, 0 if not, <0 no memory. */
static int set_add(struct u64set *s, uint64_t key, unsigned char flags)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap && set_grow(s) != 0)
		return -ENOMEM;
	for (i = mix64(key) & (s->cap - 1); s->key[i]; i = (i + 1) & (s->cap - 1)) {
		if (s->key[i] == key) {
			s->flags[i] |= flags;
			return 0;
		}
	}
	s->key[i] = key;
	s->flags[i] = flags;
	s->n++;
	return 1;
}

static unsigned long set_count(const struct u64set *s, unsigned char flag)
{
	unsigned long n = 0;
	size_t i;

	for (i = 0; i < s->cap; i++)
		if (s->key[i] && (s->flags[i] & flag))
			n++;
	return n;
}

static int slots_grow(struct report *r)
{
	size_t cap = r->nslot ? r->nslot * 2 : 256, i, j;
	uint32_t *slot = calloc(cap, sizeof(*slot));

	if (!slot)
		return -ENOMEM;
	for (i = 0; i < r->nk; i++) {
		for (j = hash_str(r->k[i].name) & (cap - 1); slot[j]; j = (j + 1) & (cap - 1))
			;
		slot[j] = (uint32_t)(i + 1);
	}
	free(r->slot);
	r->slot = slot;
	r->nslot = cap;
	return 0;
}

/* The row for kernel @name, created on first sight; NULL without memory. */
static struct kstat *kernel_row(struct report *r, const char *name)
{
	struct kstat *k;
	size_t i;
	int c;

	if (2 * (r->nk + 1) > r->nslot && slots_grow(r) != 0)
		return NULL;
	for (i = hash_str(name) & (r->nslot - 1); r->slot[i]; i = (i + 1) & (r->nslot - 1))
		if (strcmp(r->k[r->slot[i] - 1].name, name) == 0)
			return &r->k[r->slot[i] - 1];
	if (r->nk == r->capk) {
		size_t cap = r->capk ? r->capk * 2 : 64;
		struct kstat *nk = realloc(r->k, cap * sizeof(*nk));

		if (!nk)
			return NULL;
		r->k = nk;
		r->capk = cap;
	}
	k = &r->k[r->nk];
	memset(k, 0, sizeof(*k));
	k->name = strdup(name);
	if (!k->name)
		return NULL;
	for (c = 0; c < WORST_CLASSES; c++)
		k->worst[c].bytes = k->worst[c].static_smem = k->worst[c].dynamic_smem =
			k->worst[c].limit = -1;
	k->over = INT64_MIN;
	r->slot[i] = (uint32_t)++r->nk;
	return k;
}

static int str_is(const char *s, const char *want)
{
	return s && strcmp(s, want) == 0;
}

static void copy_str(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

/* A pid as a set key (never 0), or 0 when the event has none. */
static uint64_t pid_key(const cJSON *j)
{
	int64_t pid = jsonl_num(j, "pid");

	return pid < 0 || pid > UINT32_MAX ? 0 : (1ull << 32) | (uint64_t)pid;
}

static void note_target(struct report *r, const char *target)
{
	if (!target || r->targets == 2)
		return;
	if (r->targets == 0) {
		copy_str(r->target, sizeof(r->target), target);
		r->targets = 1;
	} else if (strncmp(r->target, target, sizeof(r->target) - 1) != 0) {
		r->targets = 2;
	}
}

/* fold_worst - @w keeps the event asking the most bytes (on a tie, the smallest limit). */
static void fold_worst(struct worst *w, const cJSON *j, int64_t total)
{
	int64_t limit = jsonl_num(j, "limit");

	if (total > w->bytes || (total == w->bytes && limit >= 0 && (w->limit < 0 || limit < w->limit))) {
		w->bytes = total;
		w->static_smem = jsonl_num(j, "static_smem");
		w->dynamic_smem = jsonl_num(j, "dynamic_smem");
		w->limit = limit;
		copy_str(w->target, sizeof(w->target), jsonl_str(j, "target"));
		copy_str(w->via, sizeof(w->via), jsonl_str(j, "via"));
	}
}

/*
 * Fold one kernel event into its row; returns whether it is a launch over its
 * limit that the shim judged (a library's launch, or an attribute set, is not).
 */
static int kernel_event(struct kstat *k, const cJSON *j, const char *event)
{
	const char *action = jsonl_str(j, "action"), *target = jsonl_str(j, "target");
	const char *origin = jsonl_str(j, "origin"), *evidence = jsonl_str(j, "evidence");
	int64_t st = jsonl_num(j, "static_smem"), dyn = jsonl_num(j, "dynamic_smem");
	int64_t limit = jsonl_num(j, "limit");
	int64_t total = st < 0 && dyn < 0 ? -1 : (st > 0 ? st : 0) + (dyn > 0 ? dyn : 0);
	int launch = str_is(event, "launch") || str_is(event, "reroute");
	int library = str_is(action, "library");

	if (target) {
		if (!k->first_target[0])
			copy_str(k->first_target, sizeof(k->first_target), target);
		else if (strncmp(k->first_target, target, sizeof(k->first_target) - 1) != 0)
			k->mixed_targets = 1;
	}
	if (origin && !k->origin)
		k->origin = strdup(origin);
	if (library) {
		k->lib_events++;
		k->lib_launches += launch;
		if (evidence && !k->evidence)
			k->evidence = strdup(evidence);
		fold_worst(&k->worst[launch ? WORST_LIB_NEED : WORST_LIB_ALLOWED], j, total);
		return 0;
	}
	k->events++;
	k->launches += launch;
	k->sets += str_is(event, "set_attribute");
	k->refused += str_is(action, "refuse");
	k->logged += str_is(action, "log");
	k->accepted += str_is(action, "accept");
	k->rerouted += str_is(action, "reroute") || str_is(event, "reroute");
	k->passed += str_is(action, "pass");
	fold_worst(&k->worst[launch ? WORST_NEED : WORST_ALLOWED], j, total);
	if (!launch || total < 0 || limit < 0)
		return 0;
	if (total - limit > k->over)
		k->over = total - limit;
	return total > limit;
}

/* Fold one parsed line into @r; -ENOMEM when out of memory. */
static int add_event(struct report *r, const cJSON *j, const char *event)
{
	const char *name = jsonl_str(j, "kernel");
	uint64_t pid = pid_key(j);
	struct kstat *k;
	int over, fresh;

	if (strcmp(event, "occupancy") == 0)
		return 0; /* a padding (SM120SHIM_EMULATE_OCCUPANCY), not a limit problem */
	if (strcmp(event, "load") == 0) {
		int64_t n = jsonl_num(j, "kernels");

		r->loads++;
		r->loaded_kernels += n > 0 ? (unsigned long)n : 0;
		return pid && set_add(&r->pids, pid, PID_SEEN | PID_LOADED) < 0 ? -ENOMEM : 0;
	}
	k = kernel_row(r, name ? name : "?");
	if (!k)
		return -ENOMEM;
	note_target(r, jsonl_str(j, "target"));
	over = kernel_event(k, j, event);
	if (!pid)
		return 0;
	if (set_add(&r->pids, pid, PID_SEEN | (over ? PID_OVER : 0)) < 0)
		return -ENOMEM;
	fresh = set_add(&r->pairs, ((uint64_t)(k - r->k) + 1) << 32 | (uint32_t)pid, PID_SEEN);
	if (fresh < 0)
		return -ENOMEM;
	k->procs += (unsigned long)fresh;
	return 0;
}

/* on_event - jsonl_read's callback: one event into the report @ctx. */
static int on_event(void *ctx, const cJSON *j, const char *event)
{
	return add_event(ctx, j, event);
}

static int utf8_continuation(const char *s)
{
	return ((unsigned char)*s & 0xc0) == 0x80;
}

/*
 * @name for the table, in @out (at least NAME_WIDTH + 1 bytes): control
 * characters as '?', and a name longer than NAME_WIDTH as its head, "..." and
 * its last NAME_TAIL bytes, cut between UTF-8 characters.
 */
static void display_name(char *out, const char *name)
{
	size_t len = strlen(name), head = len, tail = len, o = 0, i;

	if (len > NAME_WIDTH) {
		head = NAME_WIDTH - NAME_TAIL - 3;
		while (head && utf8_continuation(name + head))
			head--;
		tail = len - NAME_TAIL;
		while (tail < len && utf8_continuation(name + tail))
			tail++;
	}
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)name[i];

		if (i == head) {
			memcpy(out + o, "...", 3);
			o += 3;
			i = tail;
			if (i >= len)
				break;
			ch = (unsigned char)name[i];
		}
		out[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	out[o] = '\0';
}

static void num_cell(char *buf, size_t n, int64_t v)
{
	if (v < 0)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%lld", (long long)v);
}

static int64_t over_bytes(const struct kstat *k)
{
	return k->over > 0 ? k->over : 0;
}

/* row_target - the target column of worst event @w. */
static const char *row_target(const struct kstat *k, const struct worst *w)
{
	return k->mixed_targets ? "mixed" : w->target[0] ? w->target : "-";
}

static void launched_header(void)
{
	printf("%8s %8s %7s %8s %6s %7s %6s %8s %8s %5s  %-8s %s\n", "BYTES", "LIMIT", "OVER",
	       "LAUNCHES", "EVENTS", "REFUSED", "LOGGED", "ACCEPTED", "REROUTED", "PROCS",
	       "TARGET", "KERNEL");
}

static void launched_row(const struct kstat *k)
{
	const struct worst *w = &k->worst[WORST_NEED];
	char bytes[24], limit[24], name[NAME_WIDTH + 1];

	num_cell(bytes, sizeof(bytes), w->bytes);
	num_cell(limit, sizeof(limit), w->limit);
	display_name(name, k->name);
	printf("%8s %8s %7lld %8lu %6lu %7lu %6lu %8lu %8lu %5lu  %-8s %s\n", bytes, limit,
	       (long long)over_bytes(k), k->launches, k->events, k->refused, k->logged,
	       k->accepted, k->rerouted, k->procs, row_target(k, w), name);
}

static void allowed_header(void)
{
	printf("%8s %8s %6s %7s %6s %8s %5s  %-8s %s\n", "ALLOWED", "LIMIT", "SETS", "REFUSED",
	       "LOGGED", "ACCEPTED", "PROCS", "TARGET", "KERNEL");
}

static void allowed_row(const struct kstat *k)
{
	const struct worst *w = &k->worst[WORST_ALLOWED];
	char bytes[24], limit[24], name[NAME_WIDTH + 1];

	num_cell(bytes, sizeof(bytes), w->bytes);
	num_cell(limit, sizeof(limit), w->limit);
	display_name(name, k->name);
	printf("%8s %8s %6lu %7lu %6lu %8lu %5lu  %-8s %s\n", bytes, limit, k->sets, k->refused,
	       k->logged, k->accepted, k->procs, row_target(k, w), name);
}

static void library_header(void)
{
	printf("%8s %8s %8s %8s %6s %5s  %-8s %s\n", "NEEDS", "ALLOWED", "LIMIT", "LAUNCHES",
	       "EVENTS", "PROCS", "TARGET", "KERNEL");
}

static void library_row(const struct kstat *k)
{
	const struct worst *n = &k->worst[WORST_LIB_NEED], *a = &k->worst[WORST_LIB_ALLOWED];
	const struct worst *w = n->bytes >= 0 ? n : a;
	char needs[24], allowed[24], limit[24], name[NAME_WIDTH + 1];

	num_cell(needs, sizeof(needs), n->bytes);
	num_cell(allowed, sizeof(allowed), a->bytes);
	num_cell(limit, sizeof(limit), w->limit);
	display_name(name, k->name);
	printf("%8s %8s %8s %8lu %6lu %5lu  %-8s %s\n", needs, allowed, limit, k->lib_launches,
	       k->lib_events, k->procs, row_target(k, w), name);
	if (k->evidence)
		printf("%10s evidence: %s\n", "", k->evidence);
}

static void add_opt_num(cJSON *j, const char *key, int64_t v)
{
	if (v >= 0)
		cJSON_AddNumberToObject(j, key, (double)v);
	else
		cJSON_AddNullToObject(j, key);
}

/* add_worst - @bytes as @bytes_key, and @w's static, dynamic, limit, target and via, into @j. */
static void add_worst(cJSON *j, const char *bytes_key, int64_t bytes, const struct worst *w)
{
	add_opt_num(j, bytes_key, bytes);
	add_opt_num(j, "static_smem", w->static_smem);
	add_opt_num(j, "dynamic_smem", w->dynamic_smem);
	add_opt_num(j, "limit", w->limit);
	if (w->target[0])
		cJSON_AddStringToObject(j, "target", w->target);
	else
		cJSON_AddNullToObject(j, "target");
	if (w->via[0])
		cJSON_AddStringToObject(j, "via", w->via);
}

static void launched_json(const struct kstat *k, cJSON *j)
{
	add_worst(j, "bytes", k->worst[WORST_NEED].bytes, &k->worst[WORST_NEED]);
	add_opt_num(j, "allowed", k->worst[WORST_ALLOWED].bytes);
	cJSON_AddNumberToObject(j, "over", (double)over_bytes(k));
	cJSON_AddBoolToObject(j, "over_limit", k->over > 0);
	cJSON_AddNumberToObject(j, "events", (double)k->events);
	cJSON_AddNumberToObject(j, "launches", (double)k->launches);
	cJSON_AddNumberToObject(j, "set_attribute", (double)k->sets);
	cJSON_AddNumberToObject(j, "refused", (double)k->refused);
	cJSON_AddNumberToObject(j, "logged", (double)k->logged);
	cJSON_AddNumberToObject(j, "accepted", (double)k->accepted);
	cJSON_AddNumberToObject(j, "rerouted", (double)k->rerouted);
	cJSON_AddNumberToObject(j, "passed", (double)k->passed);
}

static void allowed_json(const struct kstat *k, cJSON *j)
{
	add_worst(j, "allowed", k->worst[WORST_ALLOWED].bytes, &k->worst[WORST_ALLOWED]);
	cJSON_AddNumberToObject(j, "set_attribute", (double)k->sets);
	cJSON_AddNumberToObject(j, "refused", (double)k->refused);
	cJSON_AddNumberToObject(j, "logged", (double)k->logged);
	cJSON_AddNumberToObject(j, "accepted", (double)k->accepted);
}

static void library_json(const struct kstat *k, cJSON *j)
{
	const struct worst *n = &k->worst[WORST_LIB_NEED], *a = &k->worst[WORST_LIB_ALLOWED];

	add_worst(j, "needs", n->bytes, n->bytes >= 0 ? n : a);
	add_opt_num(j, "allowed", a->bytes);
	cJSON_AddNumberToObject(j, "launches", (double)k->lib_launches);
	cJSON_AddNumberToObject(j, "events", (double)k->lib_events);
	if (k->evidence)
		cJSON_AddStringToObject(j, "evidence", k->evidence);
}

static int is_launched(const struct kstat *k)
{
	return k->launches > 0;
}

static int is_allowed_only(const struct kstat *k)
{
	return k->launches == 0 && k->sets > 0;
}

static int is_library(const struct kstat *k)
{
	return k->lib_events > 0;
}

static int64_t launched_key(const struct kstat *k)
{
	return k->worst[WORST_NEED].bytes;
}

static int64_t allowed_key(const struct kstat *k)
{
	return k->worst[WORST_ALLOWED].bytes;
}

static int64_t library_key(const struct kstat *k)
{
	int64_t n = k->worst[WORST_LIB_NEED].bytes, a = k->worst[WORST_LIB_ALLOWED].bytes;

	return n >= 0 ? n : a;
}

/* The report's sections: which kernels, ranked by what, printed how. */
static const struct section {
	const char *type;                       /* JSON rows' "type" */
	const char *title;                      /* printed above the table (NULL: none) */
	int (*member)(const struct kstat *k);
	int64_t (*key)(const struct kstat *k);  /* bytes to rank by, worst first */
	void (*header)(void);
	void (*row)(const struct kstat *k);
	void (*json)(const struct kstat *k, cJSON *j);
} sections[] = {
	{ "kernel", NULL, is_launched, launched_key, launched_header, launched_row,
	  launched_json },
	{ "allowed", "Allowed more than the limit by an attribute set, never launched over it "
	  "(what it was allowed is not what it needs; not failures):", is_allowed_only,
	  allowed_key, allowed_header, allowed_row, allowed_json },
	{ "library", "Library kernels, chosen by a library for the device's architecture: a real "
	  "card of the emulated target runs other code (not failures):", is_library, library_key,
	  library_header, library_row, library_json },
};

#define N_SECTIONS (sizeof(sections) / sizeof(sections[0]))

/* Worst first by the section's bytes, then most events, then by name. */
static int worst_first(const void *a, const void *b, void *ctx)
{
	const struct section *sec = ctx;
	const struct kstat *x = *(const struct kstat *const *)a, *y = *(const struct kstat *const *)b;
	int64_t kx = sec->key(x), ky = sec->key(y);
	unsigned long ex = x->events + x->lib_events, ey = y->events + y->lib_events;

	if (kx != ky)
		return kx > ky ? -1 : 1;
	if (ex != ey)
		return ex > ey ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* print_section - @sec's rows of @r, worst first; the number of rows. */
static size_t print_section(const struct report *r, const struct section *sec, int json)
{
	const struct kstat **rows = malloc((r->nk ? r->nk : 1) * sizeof(*rows));
	size_t i, n = 0;

	if (!rows) {
		fprintf(stderr, "sm120 report: out of memory sorting %zu kernels\n", r->nk);
		return 0;
	}
	for (i = 0; i < r->nk; i++)
		if (sec->member(&r->k[i]))
			rows[n++] = &r->k[i];
	qsort_r(rows, n, sizeof(*rows), worst_first, (void *)sec);
	for (i = 0; i < n; i++) {
		if (json) {
			cJSON *j = cJSON_CreateObject();

			cJSON_AddStringToObject(j, "type", sec->type);
			cJSON_AddStringToObject(j, "kernel", rows[i]->name);
			sec->json(rows[i], j);
			cJSON_AddNumberToObject(j, "processes", (double)rows[i]->procs);
			cJSON_AddBoolToObject(j, "mixed_targets", rows[i]->mixed_targets);
			if (rows[i]->origin)
				cJSON_AddStringToObject(j, "origin", rows[i]->origin);
			jsonl_print(j);
			continue;
		}
		if (i == 0 && sec->title)
			printf("\n%s\n", sec->title);
		if (i == 0)
			sec->header();
		sec->row(rows[i]);
	}
	free(rows);
	return n;
}

/* count - kernels of @r in @sec (and over their limit, when @over). */
static unsigned long count(const struct report *r, const struct section *sec, int over)
{
	unsigned long n = 0;
	size_t i;

	for (i = 0; i < r->nk; i++)
		n += sec->member(&r->k[i]) && (!over || r->k[i].over > 0);
	return n;
}

/* tool_plural - declared in commands.h: the counts of report's and scan's summaries. */
const char *tool_plural(unsigned long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void print_summary(const struct report *r, unsigned long over, FILE *out)
{
	unsigned long allowed = count(r, &sections[1], 0), library = count(r, &sections[2], 0);
	unsigned long load_procs = set_count(&r->pids, PID_LOADED);
	unsigned long over_procs = set_count(&r->pids, PID_OVER);
	char limit[64];

	if (r->targets == 1)
		snprintf(limit, sizeof(limit), "the %s limit", r->target);
	else if (r->targets)
		snprintf(limit, sizeof(limit), "their targets' limits");
	else
		snprintf(limit, sizeof(limit), "the limit");
	fprintf(out, "%lu module %s", r->loads, tool_plural(r->loads, "load", "loads"));
	if (r->loaded_kernels)
		fprintf(out, " (%lu %s)", r->loaded_kernels,
			tool_plural(r->loaded_kernels, "kernel", "kernels"));
	fprintf(out, " in %lu %s\n", load_procs, tool_plural(load_procs, "process", "processes"));
	fprintf(out, "%lu %s over %s in %lu %s (%lu log %s)\n", over,
		tool_plural(over, "kernel", "kernels"), limit, over_procs,
		tool_plural(over_procs, "process", "processes"), r->io.files,
		tool_plural(r->io.files, "file", "files"));
	if (allowed)
		fprintf(out, "%lu %s allowed more than %s by an attribute set, never launched over "
			"it (not failures)\n", allowed, tool_plural(allowed, "kernel", "kernels"),
			limit);
	if (library)
		fprintf(out, "%lu library %s chosen for the device's architecture, passed unchanged "
			"(not failures)\n", library, tool_plural(library, "kernel", "kernels"));
}

static void print_json_summary(const struct report *r, unsigned long over)
{
	cJSON *j = cJSON_CreateObject();

	cJSON_AddStringToObject(j, "type", "summary");
	if (r->targets == 1)
		cJSON_AddStringToObject(j, "target", r->target);
	else
		cJSON_AddNullToObject(j, "target");
	cJSON_AddNumberToObject(j, "kernels", (double)r->nk);
	cJSON_AddNumberToObject(j, "kernels_over", (double)over);
	cJSON_AddNumberToObject(j, "kernels_allowed_only", (double)count(r, &sections[1], 0));
	cJSON_AddNumberToObject(j, "library_kernels", (double)count(r, &sections[2], 0));
	cJSON_AddNumberToObject(j, "processes", (double)set_count(&r->pids, PID_SEEN));
	cJSON_AddNumberToObject(j, "processes_over", (double)set_count(&r->pids, PID_OVER));
	cJSON_AddNumberToObject(j, "loads", (double)r->loads);
	cJSON_AddNumberToObject(j, "loaded_kernels", (double)r->loaded_kernels);
	cJSON_AddNumberToObject(j, "load_processes", (double)set_count(&r->pids, PID_LOADED));
	cJSON_AddNumberToObject(j, "files", (double)r->io.files);
	cJSON_AddNumberToObject(j, "unreadable_files", (double)r->io.bad_files);
	cJSON_AddNumberToObject(j, "bad_lines", (double)r->io.bad_lines);
	jsonl_print(j);
}

static void report_free(struct report *r)
{
	size_t i;

	for (i = 0; i < r->nk; i++) {
		free(r->k[i].name);
		free(r->k[i].origin);
		free(r->k[i].evidence);
	}
	free(r->k);
	free(r->slot);
	free(r->pids.key);
	free(r->pids.flags);
	free(r->pairs.key);
	free(r->pairs.flags);
}

/*
 * cmd_report - `sm120 report [--json] LOG...`: the tables (or JSON lines) on
 * stdout, bad lines and files on stderr.  Returns 0 when no judged launch was
 * over its limit, 1 when some was, 2 on a usage error or an unreadable file
 * or line.
 */
int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct report r = { 0 };
	unsigned long over = 0;
	size_t i;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			r.json = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	for (c = optind; c < argc; c++) {
		if (jsonl_read(argv[c], "sm120 report", on_event, &r, &r.io) != 0) {
			fprintf(stderr, "sm120 report: out of memory after %zu %s\n", r.nk,
				tool_plural(r.nk, "kernel", "kernels"));
			report_free(&r);
			return 2;
		}
	}
	over = count(&r, &sections[0], 1);
	for (i = 0; i < N_SECTIONS; i++)
		print_section(&r, &sections[i], r.json);
	if (r.json)
		print_json_summary(&r, over);
	print_summary(&r, over, r.json ? stderr : stdout);
	report_free(&r);
	if (r.io.bad_lines || r.io.bad_files)
		return 2;
	return over ? 1 : 0;
}
