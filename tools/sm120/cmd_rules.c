/*
 * cmd_rules.c - `sm120 rules check|compile`: the reroute rules in rules/.
 *
 *   sm120 rules check FILE...            validate; exit 0 clean, 1 errors, 2 usage
 *   sm120 rules compile -o OUT.c FILE... the same check, then write the C table
 *                                        the shim is built with (rules.h)
 *
 * One strict schema (rules/README.md).  The tables under "Schema" describe
 * every key a file, a rule, a parameter, a tile, a rule's values and a
 * generic entry (its shared-memory model and the bounds of its compiled-in
 * names) may hold, with its type and range, and one walker checks each file
 * against them: unknown keys (with the nearest valid name), keys given twice,
 * wrong types, numbers out of range.  What a table cannot say is checked
 * after the walk: a parameter's dropped_when against its type, ids unique
 * over all files, tile and value names that look like misspellings of the
 * names other rules of the same adapter give, a bound's range or list and
 * the name it divides, bound names that misspell a tile's.  compile runs
 * exactly that check and writes nothing unless it passes.  Every error names the file, the line of the
 * key, the rule, the field and what is accepted; checking goes on past an
 * error so one run lists them all.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/adapters/adapter_table.h"
#include "../../core/rules/generic.h"
#include "../../core/rules/rules.h"
#include "commands.h"

#define MAX_RULE_FILES 64
#define MAX_RULE_BYTES (4u << 20)
#define MAX_RULES 4096 /* over all files */
#define MAX_NAME 64    /* longest id, parameter name or compiled-in name */

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const adapters[] = {
#define ADAPTER_NAME(name, what) #name,
	SHIM_ADAPTERS(ADAPTER_NAME)
#undef ADAPTER_NAME
};

/* By enum rule_type; rules_init() checks each against rule_type_parse(). */
static const char *const param_types[] = { "ptr", "i64", "i32", "fp32", "u1" };
_Static_assert(COUNT(param_types) == RULE_U1 + 1, "one name per enum rule_type");

static const char *const drop_kinds[] = { "none", "one", "always" };

/* One rules file being checked. */
struct rules_file {
	const char *path;
	char *text;
	cJSON *root;
	int errors;
	const cJSON **nodes; /* every node of root, depth first ... */
	int *lines;          /* ... and the line it is written on (a member: its key's) */
	size_t n_nodes;
};

/* ---------------------------------------------------------------- lines */

/*
 * cJSON keeps no positions, so the text is walked a second time in the order
 * cJSON builds its tree: the n-th value of the text, depth first, is the n-th
 * node of a depth-first walk of the tree.  The text is known to be valid JSON
 * (cJSON accepted it); a walk that still goes wrong leaves every line 0.
 */
struct scan {
	const char *at; /* lines are counted up to here */
	int line;
	int *lines;
	size_t n, cap;
};

static int scan_record(struct scan *s, const char *p)
{
	int *grown;

	for (; s->at < p; s->at++)
		s->line += *s->at == '\n';
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		grown = realloc(s->lines, s->cap * sizeof(*s->lines));
		if (!grown)
			return -1;
		s->lines = grown;
	}
	s->lines[s->n++] = s->line;
	return 0;
}

static const char *scan_space(const char *p)
{
	while (*p && (unsigned char)*p <= ' ')
		p++;
	return p;
}

/* scan_string - past the string that starts at @p (a '"'). */
static const char *scan_string(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : p;
}

/* scan_value - past the value at @p, recording its line (@key's, for a member); NULL if lost. */
static const char *scan_value(struct scan *s, const char *p, const char *key)
{
	char close;

	p = scan_space(p);
	if (!*p || scan_record(s, key ? key : p) != 0)
		return NULL;
	if (*p == '"')
		return scan_string(p);
	if (*p != '{' && *p != '[') {
		while (*p && strchr("0123456789+-.eEtrufalsn", *p))
			p++;
		return p;
	}
	close = *p == '{' ? '}' : ']';
	p = scan_space(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		const char *k = NULL;

		if (close == '}') {
			k = scan_space(p);
			if (*k != '"')
				return NULL;
			p = scan_space(scan_string(k));
			if (*p++ != ':')
				return NULL;
		}
		p = scan_value(s, p, k);
		if (!p)
			return NULL;
		p = scan_space(p);
		if (*p == ',')
			p++;
		else
			return *p == close ? p + 1 : NULL;
	}
}

static void collect_nodes(struct rules_file *f, const cJSON *node, size_t *n)
{
	const cJSON *c;

	if (f->nodes)
		f->nodes[*n] = node;
	(*n)++;
	for (c = node->child; c; c = c->next)
		collect_nodes(f, c, n);
}

/* index_lines - fill @f's node/line index; without it (no memory, a lost walk) lines read 0. */
static void index_lines(struct rules_file *f)
{
	struct scan s = { f->text, 1, NULL, 0, 0 };
	const char *p = f->text;
	size_t n = 0;

	if (strncmp(p, "\xef\xbb\xbf", 3) == 0) /* cJSON skips a UTF-8 byte order mark */
		p += 3;
	collect_nodes(f, f->root, &n);
	f->nodes = malloc(n * sizeof(*f->nodes));
	if (!scan_value(&s, p, NULL) || s.n != n || !f->nodes) {
		free(s.lines);
		free(f->nodes);
		f->nodes = NULL;
		return;
	}
	n = 0;
	collect_nodes(f, f->root, &n);
	f->lines = s.lines;
	f->n_nodes = n;
}

/* text_line - 1-based line of @at in @text (which must contain it). */
static int text_line(const char *text, const char *at)
{
	int line = 1;

	for (; text < at; text++)
		line += *text == '\n';
	return line;
}

/* node_line - the line @node is written on, 0 if unknown. */
static int node_line(const struct rules_file *f, const cJSON *node)
{
	size_t i;

	for (i = 0; i < f->n_nodes; i++)
		if (f->nodes[i] == node)
			return f->lines[i];
	return 0;
}

/* complain - one error line: file, line of @at, the rule (@rule: "rule 'id'", may be NULL). */
static void complain(struct rules_file *f, const char *rule, const cJSON *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void complain(struct rules_file *f, const char *rule, const cJSON *at, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sm120 rules: %s:%d: ", f->path, node_line(f, at));
	if (rule)
		fprintf(stderr, "%s: ", rule);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	f->errors++;
}

/* ---------------------------------------------------------------- names */

/* edit_distance - insertions, deletions, changes and swaps of neighbours from @a to @b. */
static int edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b), i, j;
	int d[MAX_NAME + 1][MAX_NAME + 1];

	if (n > MAX_NAME || m > MAX_NAME)
		return MAX_NAME + 1;
	for (i = 0; i <= n; i++)
		d[i][0] = (int)i;
	for (j = 0; j <= m; j++)
		d[0][j] = (int)j;
	for (i = 1; i <= n; i++)
		for (j = 1; j <= m; j++) {
			int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[n][m];
}

/*
 * A misspelling: @name is at most one edit from @known (two when @known has 6
 * or more characters), and not equal.  Tight, because it turns a free-form
 * name into an error: BLOCK_M and BLOCK_N are both legitimate.
 */
static int misspelling(const char *name, const char *known)
{
	int d = edit_distance(name, known);

	return d > 0 && d <= (strlen(known) >= 6 ? 2 : 1);
}

/* nearest - the name of @names[0..n) closest to @s, if close enough to suggest; else NULL. */
static const char *nearest(const char *s, const char *const *names, size_t n)
{
	const char *best = NULL;
	int best_d = MAX_NAME + 1;
	size_t i;

	for (i = 0; s && i < n; i++) {
		int d = edit_distance(s, names[i]);

		if (d < best_d) {
			best = names[i];
			best_d = d;
		}
	}
	if (!best || best_d >= (int)strlen(best) || (best_d > 2 && best_d * 3 > (int)strlen(best)))
		return NULL;
	return best;
}

static int one_of(const char *s, const char *const *names, size_t n)
{
	size_t i;

	for (i = 0; s && i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return 1;
	return 0;
}

/* names_list - "a, b or c" for messages, in @buf. */
static const char *names_list(char *buf, size_t size, const char *const *names, size_t n)
{
	size_t i, o = 0;

	buf[0] = '\0';
	for (i = 0; i < n && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%s", !i ? "" : i + 1 < n ? ", " : " or ",
				      names[i]);
	return buf;
}

/* is_name - letters, digits and '_', not starting with a digit, 1 to MAX_NAME characters. */
static int is_name(const char *s)
{
	size_t i;

	if (!s || !*s || strlen(s) > MAX_NAME || (*s >= '0' && *s <= '9'))
		return 0;
	for (i = 0; s[i]; i++)
		if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

/* ---------------------------------------------------------------- schema */

/* What a value must be. */
enum kind {
	K_TEXT,   /* a string of 1 to range->max characters, no control character */
	K_NAME,   /* a name (is_name) */
	K_ONE_OF, /* a string among names[0..n_names) */
	K_BOOL,   /* true or false */
	K_INT,    /* a whole number in [range->min, range->max] */
	K_NUMBER, /* a number in [range->min, range->max] */
	K_OBJECT, /* an object laid out as shape */
	K_LIST,   /* an array of range->min to range->max items, each as item */
};

enum {
	F_REQUIRED = 1, /* the key must be there */
	F_BOOL = 2,     /* K_INT, K_NUMBER: true and false stand for 1 and 0 */
	F_ONCE = 4,     /* K_LIST of strings: no item twice */
};

struct range {
	double min, max;
};

/* One key of an object (key NULL: a list's items, or a free-form object's other keys). */
struct field {
	const char *key;
	enum kind kind;
	unsigned flags;
	const struct range *range;
	const char *const *names; /* K_ONE_OF */
	size_t n_names;
	const char *names_are;    /* K_ONE_OF: what the names are ("the shim's adapters"), or NULL */
	const struct shape *shape; /* K_OBJECT */
	const struct field *item;  /* K_LIST */
	const char *why;           /* said after what is accepted, or NULL */
};

/* An object: its fixed keys, and what any other key holds when it may have others. */
struct shape {
	const char *what;          /* "a rule", for messages */
	const struct field *fields;
	size_t n_fields;
	const struct field *other; /* NULL: no other key; else other keys are names (is_name) */
	const char *label_key;     /* messages inside the object name it by this key ("id") */
};

/*
 * Rules reroute launches that overflow the target, sm120, and no GPU offers
 * more than the largest opt-in, sm90's: a tile's dynamic_smem lies in
 * (sm120 opt-in, sm90 opt-in].  rules_init() reads both from core/limits.
 */
#define RULES_TARGET "sm120"
#define RULES_LARGEST "sm90"
static struct range smem_bytes;
static char smem_why[256];

static const struct range schema_version = { 1, 1 };
static const struct range id_chars = { 1, MAX_NAME };
static const struct range kernel_chars = { 1, 1024 };
static const struct range source_chars = { 1, 4096 };
static const struct range description_chars = { 1, 16384 };
static const struct range rules_count = { 1, MAX_RULES };
static const struct range params_count = { 1, RULE_MAX_PARAMS };
static const struct range tiles_count = { 1, 64 };
static const struct range settings_count = { 0, RULE_NSETTINGS };
static const struct range tile_value_range = { 0, 65536 };
static const struct range value_range = { -2147483648.0, 2147483647.0 };

static const struct field param_fields[] = {
	{ .key = "name", .kind = K_NAME, .flags = F_REQUIRED },
	{ .key = "type", .kind = K_ONE_OF, .flags = F_REQUIRED,
	  .names = param_types, .n_names = COUNT(param_types) },
	{ .key = "dropped_when", .kind = K_ONE_OF, .names = drop_kinds, .n_names = COUNT(drop_kinds) },
	{ .key = "supported", .kind = K_BOOL },
};
static const struct shape param_shape = {
	.what = "a parameter", .fields = param_fields, .n_fields = COUNT(param_fields),
};

static const struct field tile_fields[] = {
	{ .key = "dynamic_smem", .kind = K_INT, .flags = F_REQUIRED, .range = &smem_bytes,
	  .why = smem_why },
};
static const struct field tile_value = {
	.kind = K_INT, .flags = F_BOOL, .range = &tile_value_range,
	.why = "a compiled-in block size, warp or stage count, head size or 0/1 flag",
};
static const struct shape tile_shape = {
	.what = "a tile", .fields = tile_fields, .n_fields = COUNT(tile_fields), .other = &tile_value,
};

/* A generic entry: its shared-memory model and the bounds of each compiled-in value. */
static const struct range bound_value = { 0, 65536 };
static const struct range bound_step = { 1, 65536 };
static const struct range one_of_count = { 1, 16 };
static const struct range why_chars = { 1, 1024 };
static const struct field bound_number = { .kind = K_INT, .range = &bound_value };
static const struct field bound_fields[] = {
	{ .key = "min", .kind = K_INT, .range = &bound_value },
	{ .key = "max", .kind = K_INT, .range = &bound_value },
	{ .key = "multiple_of", .kind = K_INT, .range = &bound_step },
	{ .key = "one_of", .kind = K_LIST, .range = &one_of_count, .item = &bound_number },
	{ .key = "divides", .kind = K_NAME },
	{ .key = "why", .kind = K_TEXT, .range = &why_chars },
};
static const struct shape bound_shape = {
	.what = "a bound", .fields = bound_fields, .n_fields = COUNT(bound_fields),
};
static const struct field bound_item = {
	.kind = K_OBJECT, .shape = &bound_shape,
	.why = "the values of a compiled-in name the bundled kernel computes correctly",
};
static const struct shape bounds_shape = { .what = "compiled", .other = &bound_item };
static const struct field generic_fields[] = {
	{ .key = "shared_memory", .kind = K_ONE_OF, .flags = F_REQUIRED,
	  .names = rule_smem_model_names, .n_names = RULE_NSMEM_MODELS,
	  .names_are = "the shim's shared-memory models" },
	{ .key = "compiled", .kind = K_OBJECT, .flags = F_REQUIRED, .shape = &bounds_shape },
};
static const struct shape generic_shape = {
	.what = "a generic entry", .fields = generic_fields, .n_fields = COUNT(generic_fields),
};

static const struct field rule_value = {
	.kind = K_NUMBER, .flags = F_BOOL, .range = &value_range,
};
static const struct shape values_shape = { .what = "values", .other = &rule_value };

static const struct field param_item = { .kind = K_OBJECT, .shape = &param_shape };
static const struct field tile_item = { .kind = K_OBJECT, .shape = &tile_shape };
static const struct field setting_item = {
	.kind = K_ONE_OF, .names = rule_setting_names, .n_names = RULE_NSETTINGS,
	.names_are = "the settings",
};
static const struct field rule_fields[] = {
	{ .key = "id", .kind = K_TEXT, .flags = F_REQUIRED, .range = &id_chars,
	  .why = "unique over all files" },
	{ .key = "kernel", .kind = K_TEXT, .flags = F_REQUIRED, .range = &kernel_chars },
	{ .key = "adapter", .kind = K_ONE_OF, .flags = F_REQUIRED, .names = adapters,
	  .n_names = COUNT(adapters), .names_are = "the shim's adapters" },
	{ .key = "source", .kind = K_TEXT, .flags = F_REQUIRED, .range = &source_chars },
	{ .key = "params", .kind = K_LIST, .flags = F_REQUIRED, .range = &params_count,
	  .item = &param_item },
	{ .key = "tiles", .kind = K_LIST, .flags = F_REQUIRED, .range = &tiles_count,
	  .item = &tile_item, .why = "one per rerouted configuration" },
	{ .key = "values", .kind = K_OBJECT, .shape = &values_shape },
	{ .key = "settings", .kind = K_LIST, .flags = F_ONCE, .range = &settings_count,
	  .item = &setting_item },
	{ .key = "generic", .kind = K_OBJECT, .shape = &generic_shape },
	{ .key = "needs_compiled_facts", .kind = K_BOOL,
	  .why = "true: launches without the Python hook's compiled facts are refused" },
};
static const struct shape rule_shape = {
	.what = "a rule", .fields = rule_fields, .n_fields = COUNT(rule_fields), .label_key = "id",
};

static const struct field rule_item = { .kind = K_OBJECT, .shape = &rule_shape };
static const struct field file_fields[] = {
	{ .key = "schema", .kind = K_INT, .flags = F_REQUIRED, .range = &schema_version,
	  .why = "the version rules/README.md describes" },
	{ .key = "description", .kind = K_TEXT, .range = &description_chars },
	{ .key = "rules", .kind = K_LIST, .flags = F_REQUIRED, .range = &rules_count,
	  .item = &rule_item },
};
static const struct shape file_shape = {
	.what = "a rules file", .fields = file_fields, .n_fields = COUNT(file_fields),
};
static const struct field file_root = { .kind = K_OBJECT, .shape = &file_shape };

/* rules_init - the limits the schema takes from core/limits; 0, or -1 (said why). */
static int rules_init(void)
{
	struct target_limits target, largest;
	struct sm_err err;
	size_t i;

	for (i = 0; i < COUNT(param_types); i++)
		if (rule_type_parse(param_types[i]) != (int)i) {
			fprintf(stderr, "sm120 rules: internal: type '%s' is not enum rule_type %zu\n",
				param_types[i], i);
			return -1;
		}
	if (target_parse(RULES_TARGET, &target, &err) != 0 ||
	    target_parse(RULES_LARGEST, &largest, &err) != 0) {
		fprintf(stderr, "sm120 rules: internal: %s\n", err.msg);
		return -1;
	}
	smem_bytes.min = target.optin_per_block + 1.0;
	smem_bytes.max = largest.optin_per_block;
	snprintf(smem_why, sizeof(smem_why),
		 "bytes: over %s's opt-in limit of %u, since a tile that fits is never an over-limit "
		 "launch, and at most %s's %u, the largest opt-in of any profile", target.name,
		 target.optin_per_block, largest.name, largest.optin_per_block);
	return 0;
}

/* ---------------------------------------------------------------- the walk */

struct walk {
	struct rules_file *f;
	const char *rule; /* "rule 'id'" or "rules[N]" inside a rule, else NULL */
};

/* shown - @s for a message: at most 60 characters, control characters as '?'. */
static const char *shown(const char *s, char *buf, size_t size)
{
	size_t i;

	for (i = 0; s[i] && i < 60 && i + 4 < size; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (s[i]) {
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	buf[i] = '\0';
	return buf;
}

static int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* number_text - @x as short as prints it back exactly. */
static const char *number_text(double x, char *buf, size_t size)
{
	snprintf(buf, size, "%.15g", x);
	if (strtod(buf, NULL) != x)
		snprintf(buf, size, "%.17g", x);
	return buf;
}

/* got - what @v is, for messages. */
static const char *got(const cJSON *v, char *buf, size_t size)
{
	char s[72];

	if (cJSON_IsString(v))
		snprintf(buf, size, "'%s'", shown(v->valuestring, s, sizeof(s)));
	else if (cJSON_IsNumber(v))
		number_text(v->valuedouble, buf, size);
	else if (cJSON_IsBool(v))
		snprintf(buf, size, "%s", cJSON_IsTrue(v) ? "true" : "false");
	else if (cJSON_IsArray(v) && !cJSON_GetArraySize(v))
		snprintf(buf, size, "an empty array");
	else if (cJSON_IsArray(v))
		snprintf(buf, size, "an array of %d items", cJSON_GetArraySize(v));
	else if (cJSON_IsObject(v))
		snprintf(buf, size, "an object");
	else
		snprintf(buf, size, "null");
	return buf;
}

/* accepts - what @fd accepts, for messages. */
static const char *accepts(const struct field *fd, char *buf, size_t size)
{
	char names[512];

	switch (fd->kind) {
	case K_TEXT:
		snprintf(buf, size, "a string of 1 to %.0f characters, none a control character",
			 fd->range->max);
		break;
	case K_NAME:
		snprintf(buf, size, "a name of 1 to %d letters, digits and '_', not starting with a "
			 "digit", MAX_NAME);
		break;
	case K_ONE_OF:
		names_list(names, sizeof(names), fd->names, fd->n_names);
		if (fd->names_are)
			snprintf(buf, size, "one of %s (%s)", fd->names_are, names);
		else
			snprintf(buf, size, "%s", names);
		break;
	case K_BOOL:
		snprintf(buf, size, "true or false");
		break;
	case K_INT:
	case K_NUMBER:
		if (fd->range->min == fd->range->max)
			snprintf(buf, size, "%.0f", fd->range->min);
		else
			snprintf(buf, size, "a %s from %.0f to %.0f%s",
				 fd->kind == K_INT ? "whole number" : "number", fd->range->min,
				 fd->range->max, fd->flags & F_BOOL ? " (or true/false for 1/0)" : "");
		break;
	case K_OBJECT:
		snprintf(buf, size, "an object (%s)", fd->shape->what);
		break;
	case K_LIST:
		snprintf(buf, size, "%s of at most %.0f items",
			 fd->range->min > 0 ? "a non-empty array" : "an array", fd->range->max);
		break;
	}
	return buf;
}

/* bad - @v at @path is not what @fd accepts; @suggest: a near name, or NULL. */
static void bad(struct walk *w, const cJSON *v, const struct field *fd, const char *path,
		const char *suggest)
{
	char want[768], have[96], more[400];
	const char *sep = *path ? ": " : "";

	accepts(fd, want, sizeof(want));
	got(v, have, sizeof(have));
	snprintf(more, sizeof(more), "%s%s%s%s%s%s", suggest ? " (did you mean '" : "",
		 suggest ?: "", suggest ? "'?)" : "", fd->why ? " (" : "", fd->why ?: "",
		 fd->why ? ")" : "");
	if (fd->kind == K_ONE_OF && cJSON_IsString(v))
		complain(w->f, w->rule, v, "%s%s%s is not %s%s", path, sep, have, want, more);
	else
		complain(w->f, w->rule, v, "%s%smust be %s, not %s%s", path, sep, want, have, more);
}

/* rule_label - "rule 'id'" when @r has a valid id, else @fallback ("rules[3]"). */
static const char *rule_label(const cJSON *r, const char *fallback, char *buf, size_t size)
{
	const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "id"));

	if (id && *id && strlen(id) <= MAX_NAME && !has_control(id))
		snprintf(buf, size, "rule '%s'", id);
	else
		snprintf(buf, size, "%s", fallback);
	return buf;
}

static void check_object(struct walk *w, const cJSON *obj, const struct shape *s, const char *path);

/* check_value - @v (at @path) against @fd. */
static void check_value(struct walk *w, const cJSON *v, const struct field *fd, const char *path)
{
	const cJSON *c, *d;
	char p[256];
	double x;
	int i = 0, j;

	switch (fd->kind) {
	case K_TEXT:
		if (!cJSON_IsString(v) || !v->valuestring[0] ||
		    strlen(v->valuestring) > fd->range->max || has_control(v->valuestring))
			bad(w, v, fd, path, NULL);
		return;
	case K_NAME:
		if (!cJSON_IsString(v) || !is_name(v->valuestring))
			bad(w, v, fd, path, NULL);
		return;
	case K_ONE_OF:
		if (!cJSON_IsString(v))
			bad(w, v, fd, path, NULL);
		else if (!one_of(v->valuestring, fd->names, fd->n_names))
			bad(w, v, fd, path, nearest(v->valuestring, fd->names, fd->n_names));
		return;
	case K_BOOL:
		if (!cJSON_IsBool(v))
			bad(w, v, fd, path, NULL);
		return;
	case K_INT:
	case K_NUMBER:
		if (cJSON_IsBool(v) && (fd->flags & F_BOOL))
			return;
		x = cJSON_IsNumber(v) ? v->valuedouble : 0;
		if (!cJSON_IsNumber(v) || !(x >= fd->range->min && x <= fd->range->max) ||
		    (fd->kind == K_INT && x != floor(x)))
			bad(w, v, fd, path, NULL);
		return;
	case K_OBJECT:
		if (cJSON_IsObject(v))
			check_object(w, v, fd->shape, path);
		else
			bad(w, v, fd, path, NULL);
		return;
	case K_LIST:
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < fd->range->min ||
		    cJSON_GetArraySize(v) > fd->range->max) {
			bad(w, v, fd, path, NULL);
			return;
		}
		cJSON_ArrayForEach(c, v) {
			snprintf(p, sizeof(p), "%s[%d]", path, i++);
			check_value(w, c, fd->item, p);
			if (!(fd->flags & F_ONCE) || !cJSON_IsString(c))
				continue;
			for (d = v->child, j = 0; d != c; d = d->next, j++)
				if (cJSON_IsString(d) && strcmp(d->valuestring, c->valuestring) == 0) {
					complain(w->f, w->rule, c, "%s: '%s' is also %s[%d]: each is "
						 "listed once", p, c->valuestring, path, j);
					break;
				}
		}
		return;
	}
}

/* field_of - @s's fixed field @key, or NULL. */
static const struct field *field_of(const struct shape *s, const char *key)
{
	size_t i;

	for (i = 0; i < s->n_fields; i++)
		if (strcmp(s->fields[i].key, key) == 0)
			return &s->fields[i];
	return NULL;
}

/* fixed_near - @s's fixed key nearest to @key, if close enough to suggest; else NULL. */
static const char *fixed_near(const struct shape *s, const char *key)
{
	const char *keys[16];
	size_t i;

	for (i = 0; i < s->n_fields && i < COUNT(keys); i++)
		keys[i] = s->fields[i].key;
	return nearest(key, keys, i);
}

/* free_name - @key is a free-form name of @s: a name, not a fixed key nor a misspelling of one. */
static int free_name(const struct shape *s, const char *key)
{
	const char *near = fixed_near(s, key);

	return s->other && is_name(key) && !field_of(s, key) && !(near && misspelling(key, near));
}

/* keys_list - @s's fixed keys, "a, b or c", plus its free-form names if it has them. */
static const char *keys_list(const struct shape *s, char *buf, size_t size)
{
	const char *keys[16] = { NULL };
	char other[256];
	size_t i, o;

	for (i = 0; i < s->n_fields && i < COUNT(keys); i++)
		keys[i] = s->fields[i].key;
	names_list(buf, size, keys, i);
	o = strlen(buf);
	if (s->other)
		snprintf(buf + o, size - o, "%sany other name (letters, digits and '_', not starting "
			 "with a digit) for %s", i ? " and " : "",
			 accepts(s->other, other, sizeof(other)));
	return buf;
}

/*
 * check_object - every key of @obj (at @path) against @s: each known or, in a
 * free-form object, a name that is not a misspelling of a fixed key; each
 * once; every required key there.
 */
static void check_object(struct walk *w, const cJSON *obj, const struct shape *s, const char *path)
{
	const char *outer = w->rule;
	const cJSON *c, *d;
	char label[MAX_NAME + 16], p[256], key[72], list[512];
	unsigned taken = 0; /* required fields a misspelt key was taken for */
	size_t i;

	if (s->label_key) {
		w->rule = rule_label(obj, path, label, sizeof(label));
		path = "";
	}
	for (c = obj->child; c; c = c->next) {
		const struct field *fd = field_of(s, c->string);
		const char *near;

		snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "",
			 shown(c->string, key, sizeof(key)));
		for (d = obj->child; d != c && strcmp(d->string, c->string) != 0; d = d->next)
			;
		if (d != c) {
			complain(w->f, w->rule, c, "%s: given twice (first on line %d): a key may "
				 "appear once", p, node_line(w->f, d));
			continue;
		}
		if (fd) {
			check_value(w, c, fd, p);
			continue;
		}
		if (free_name(s, c->string)) {
			check_value(w, c, s->other, p);
			continue;
		}
		near = fixed_near(s, c->string);
		if (near)
			taken |= 1u << (field_of(s, near) - s->fields);
		if (s->other && !is_name(c->string))
			complain(w->f, w->rule, c, "%s: not a name: the keys of %s are %s", p,
				 s->what, keys_list(s, list, sizeof(list)));
		else
			complain(w->f, w->rule, c, "%s: unknown key in %s%s%s%s; accepted: %s", p,
				 s->what, near ? " (did you mean '" : "", near ?: "", near ? "'?)" : "",
				 keys_list(s, list, sizeof(list)));
	}
	for (i = 0; i < s->n_fields; i++)
		if ((s->fields[i].flags & F_REQUIRED) && !(taken & 1u << i) &&
		    !cJSON_GetObjectItemCaseSensitive(obj, s->fields[i].key))
			complain(w->f, w->rule, obj, "%s%sno \"%s\" (required: %s)", path,
				 *path ? ": " : "", s->fields[i].key,
				 accepts(&s->fields[i], list, sizeof(list)));
	w->rule = outer;
}

/* ---------------------------------------------------------------- beyond the tables */

static const char *string_of(const cJSON *obj, const char *key)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

/* check_params - dropped_when against the type, supported: false, each name once. */
static void check_params(struct rules_file *f, const char *rule, const cJSON *params)
{
	const cJSON *p, *q;
	int i = 0, j;

	cJSON_ArrayForEach(p, params) {
		const char *name = string_of(p, "name"), *drop = string_of(p, "dropped_when");
		const cJSON *sup = cJSON_GetObjectItemCaseSensitive(p, "supported");
		int t = rule_type_parse(string_of(p, "type") ?: "");

		if (t >= 0 && drop && strcmp(drop, "none") == 0 && t != RULE_PTR)
			complain(f, rule, p, "params[%d]: only a ptr is dropped when None", i);
		else if (t >= 0 && one_of(drop, drop_kinds + 1, COUNT(drop_kinds) - 1) &&
			 t != RULE_I32 && t != RULE_I64)
			complain(f, rule, p, "params[%d]: only an i32 or i64 is dropped when it is 1", i);
		if (cJSON_IsFalse(sup) && !cJSON_GetObjectItemCaseSensitive(p, "dropped_when"))
			complain(f, rule, sup, "params[%d].supported: false needs dropped_when (a "
				 "parameter that is always there cannot be refused)", i);
		for (q = params->child, j = 0; name && q != p; q = q->next, j++)
			if (strcmp(name, string_of(q, "name") ?: "") == 0) {
				complain(f, rule, cJSON_GetObjectItemCaseSensitive(p, "name"),
					 "params[%d].name: '%s' is also params[%d]", i, name, j);
				break;
			}
		i++;
	}
}

/* check_tiles - each tile's dynamic_smem its own; no name both in a tile and in values. */
static void check_tiles(struct rules_file *f, const char *rule, const cJSON *tiles,
			const cJSON *values)
{
	const cJSON *t, *u, *k;
	int i = 0, j;

	cJSON_ArrayForEach(t, tiles) {
		const cJSON *smem = cJSON_GetObjectItemCaseSensitive(t, "dynamic_smem");

		for (u = tiles->child, j = 0; cJSON_IsNumber(smem) && u != t; u = u->next, j++)
			if (cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "dynamic_smem")) ==
			    smem->valuedouble) {
				complain(f, rule, smem, "tiles[%d].dynamic_smem: %.0f is also tiles[%d]'s "
					 "(a launch's shared memory picks one tile)", i, smem->valuedouble,
					 j);
				break;
			}
		if (cJSON_IsObject(t) && cJSON_IsObject(values))
			cJSON_ArrayForEach(k, t)
				if (cJSON_GetObjectItemCaseSensitive(values, k->string))
					complain(f, rule, k, "tiles[%d].%s: also in values: a compiled-in "
						 "value is given once (the tile's would hide the rule's)",
						 i, k->string);
		i++;
	}
}

/* tiles_have - some tile of @tiles has the key @name. */
static int tiles_have(const cJSON *tiles, const char *name)
{
	const cJSON *t;

	cJSON_ArrayForEach(t, tiles)
		if (cJSON_IsObject(t) && cJSON_GetObjectItemCaseSensitive(t, name))
			return 1;
	return 0;
}

/*
 * tile_near - a key of @tiles that @name (a bound of @compiled that no tile
 * gives) misspells and that is no bound of @compiled itself, or NULL.
 */
static const char *tile_near(const cJSON *tiles, const cJSON *compiled, const char *name)
{
	const cJSON *t, *k;

	if (tiles_have(tiles, name))
		return NULL;
	cJSON_ArrayForEach(t, tiles)
		if (cJSON_IsObject(t))
			cJSON_ArrayForEach(k, t)
				if (strcmp(k->string, "dynamic_smem") != 0 && misspelling(name, k->string) &&
				    !cJSON_GetObjectItemCaseSensitive(compiled, k->string))
					return k->string;
	return NULL;
}

/*
 * check_bound - what the bound table cannot say: a list or a range (min and
 * max, min <= max, a step only with a range), a list's values once each, and
 * divides naming another compiled-in name.
 */
static void check_bound(struct rules_file *f, const char *rule, const char *name, const cJSON *b)
{
	const cJSON *min = cJSON_GetObjectItemCaseSensitive(b, "min");
	const cJSON *max = cJSON_GetObjectItemCaseSensitive(b, "max");
	const cJSON *step = cJSON_GetObjectItemCaseSensitive(b, "multiple_of");
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(b, "one_of");
	const char *divides = string_of(b, "divides");
	const cJSON *v, *w;
	int i = 0, j;

	if (list && (min || max || step))
		complain(f, rule, b, "generic.compiled.%s: give one_of or min/max (and multiple_of), "
			 "not both: a value is taken from a list or from a range", name);
	else if (!list && (!min || !max))
		complain(f, rule, b, "generic.compiled.%s: needs min and max (whole numbers from 0 "
			 "to 65536), or one_of: the values the bundled kernel computes correctly",
			 name);
	else if (!list && cJSON_IsNumber(min) && cJSON_IsNumber(max) &&
		 min->valuedouble > max->valuedouble)
		complain(f, rule, min, "generic.compiled.%s.min: %.0f is above max %.0f", name,
			 min->valuedouble, max->valuedouble);
	if (cJSON_IsArray(list))
		cJSON_ArrayForEach(v, list) {
			for (w = list->child, j = 0; w != v; w = w->next, j++)
				if (cJSON_IsNumber(v) && cJSON_IsNumber(w) &&
				    v->valuedouble == w->valuedouble) {
					complain(f, rule, v, "generic.compiled.%s.one_of[%d]: %.0f is also "
						 "one_of[%d]: each value is listed once", name, i,
						 v->valuedouble, j);
					break;
				}
			i++;
		}
	if (divides && strcmp(divides, name) == 0)
		complain(f, rule, cJSON_GetObjectItemCaseSensitive(b, "divides"),
			 "generic.compiled.%s.divides: names the bound itself; give the compiled-in "
			 "name whose value it must divide (group_k)", name);
}

/*
 * check_generic - a generic entry's bounds: 1 to RULE_MAX_BOUNDS names, each
 * bound sound (check_bound), and no name that misspells one the rule's tiles
 * give and its bounds lack (they are read from the facts by name: a misspelt
 * one refuses every kernel).
 */
static void check_generic(struct rules_file *f, const char *rule, const cJSON *generic,
			  const cJSON *tiles)
{
	const cJSON *compiled = cJSON_GetObjectItemCaseSensitive(generic, "compiled");
	const cJSON *b;
	const char *near;
	int n;

	if (!cJSON_IsObject(compiled))
		return;
	n = cJSON_GetArraySize(compiled);
	if (n < 1 || n > RULE_MAX_BOUNDS)
		complain(f, rule, compiled, "generic.compiled: %d names; give 1 to %d, the compiled-in "
			 "values the bundled kernel needs", n, RULE_MAX_BOUNDS);
	cJSON_ArrayForEach(b, compiled) {
		if (!is_name(b->string) || !cJSON_IsObject(b))
			continue;
		check_bound(f, rule, b->string, b);
		if (cJSON_IsArray(tiles) && (near = tile_near(tiles, compiled, b->string)))
			complain(f, rule, b, "generic.compiled.%s: did you mean '%s'? The rule's tiles "
				 "give %s, none gives %s", b->string, near, near, b->string);
	}
}

/* check_rule - what the schema tables cannot say about rule @r. */
static void check_rule(struct rules_file *f, const cJSON *r, int index)
{
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(r, "params");
	const cJSON *tiles = cJSON_GetObjectItemCaseSensitive(r, "tiles");
	char fallback[32], label[MAX_NAME + 16];

	snprintf(fallback, sizeof(fallback), "rules[%d]", index);
	rule_label(r, fallback, label, sizeof(label));
	if (cJSON_IsArray(params))
		check_params(f, label, params);
	if (cJSON_IsArray(tiles))
		check_tiles(f, label, tiles, cJSON_GetObjectItemCaseSensitive(r, "values"));
	if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r, "generic")))
		check_generic(f, label, cJSON_GetObjectItemCaseSensitive(r, "generic"), tiles);
}

/* ---------------------------------------------------------------- over all files */

/* A rule, for the checks that compare rules: ids, and names other rules of its adapter give. */
struct rule_ref {
	struct rules_file *f;
	const cJSON *r, *tiles, *values;
	const char *id, *adapter;
	char label[MAX_NAME + 16];
};

/* gives - @obj (a tile or values) has the key @name. */
static int gives(const cJSON *obj, const char *name)
{
	return cJSON_IsObject(obj) && cJSON_GetObjectItemCaseSensitive(obj, name);
}

/* tiles_give - some tile of @tiles other than @except has @name. */
static int tiles_give(const cJSON *tiles, const cJSON *except, const char *name)
{
	const cJSON *t;

	cJSON_ArrayForEach(t, tiles)
		if (t != except && gives(t, name))
			return 1;
	return 0;
}

/* lacks - rule @a does not give @name: in @tile and its values, or (@tile NULL) anywhere. */
static int lacks(const struct rule_ref *a, const cJSON *tile, const char *name)
{
	return !gives(a->values, name) &&
	       (tile ? !gives(tile, name) : !tiles_give(a->tiles, NULL, name));
}

/*
 * giving - how many tiles other than @tile of rules with @a's adapter give
 * @name (with @tile NULL: how many of those rules' values, @a's aside).
 */
static int giving(const struct rule_ref *refs, int n, const struct rule_ref *a, const cJSON *tile,
		  const char *name)
{
	const cJSON *t;
	int i, count = 0;

	for (i = 0; i < n; i++) {
		if (!refs[i].adapter || strcmp(refs[i].adapter, a->adapter) != 0)
			continue;
		if (!tile)
			count += &refs[i] != a && gives(refs[i].values, name);
		else
			cJSON_ArrayForEach(t, refs[i].tiles)
				count += t != tile && gives(t, name);
	}
	return count;
}

/*
 * consider - into *@best, a free-form key of @obj that @name misspells, @a
 * lacks and at least two others give, if nearer than *@best.
 */
static void consider(const struct rule_ref *refs, int n, const struct rule_ref *a,
		     const cJSON *tile, const char *name, const cJSON *obj, const char **best)
{
	const struct shape *s = tile ? &tile_shape : &values_shape;
	const cJSON *k;

	if (!cJSON_IsObject(obj))
		return;
	cJSON_ArrayForEach(k, obj)
		if (free_name(s, k->string) && misspelling(name, k->string) &&
		    lacks(a, tile, k->string) &&
		    (!*best || edit_distance(name, k->string) < edit_distance(name, *best)) &&
		    giving(refs, n, a, tile, k->string) >= 2)
			*best = k->string;
}

/*
 * misspelt - @name, a free-form key of @tile of rule @a (of its values when
 * @tile is NULL), that no other tile (no other rule's values) of @a's adapter
 * gives, but that misspells a name which at least two of them give and @a
 * lacks: that name, else NULL.  At least two, so that of two tiles that
 * disagree neither is taken for the right one.
 */
static const char *misspelt(const struct rule_ref *refs, int n, const struct rule_ref *a,
			    const cJSON *tile, const char *name)
{
	const char *best = NULL;
	const cJSON *t;
	int i;

	if (giving(refs, n, a, tile, name))
		return NULL;
	for (i = 0; i < n; i++) {
		const struct rule_ref *b = &refs[i];

		if (!b->adapter || strcmp(b->adapter, a->adapter) != 0)
			continue;
		if (!tile && b != a)
			consider(refs, n, a, NULL, name, b->values, &best);
		else if (tile)
			cJSON_ArrayForEach(t, b->tiles)
				if (t != tile)
					consider(refs, n, a, tile, name, t, &best);
	}
	return best;
}

/* check_names - rule @a's free-form names in its tiles and values, against its adapter's others. */
static void check_names(const struct rule_ref *refs, int n, const struct rule_ref *a)
{
	const cJSON *t, *k;
	const char *near;
	int i = 0;

	cJSON_ArrayForEach(t, a->tiles) {
		if (cJSON_IsObject(t))
			cJSON_ArrayForEach(k, t)
				if (free_name(&tile_shape, k->string) &&
				    (near = misspelt(refs, n, a, t, k->string)))
					complain(a->f, a->label, k, "tiles[%d].%s: did you mean '%s'? "
						 "No other %s tile names %s; %d give %s, which this one "
						 "lacks", i, k->string, near, a->adapter, k->string,
						 giving(refs, n, a, t, near), near);
		i++;
	}
	cJSON_ArrayForEach(k, a->values)
		if (free_name(&values_shape, k->string) &&
		    (near = misspelt(refs, n, a, NULL, k->string)))
			complain(a->f, a->label, k, "values.%s: did you mean '%s'? No other %s rule's "
				 "values name %s; %d give %s, which this rule lacks", k->string, near,
				 a->adapter, k->string, giving(refs, n, a, NULL, near), near);
}

/*
 * check_across - over all files: ids unique, and the free-form names of
 * tiles and values, each against the names the other rules of the same
 * adapter give (a near miss of one of those that this rule lacks is taken
 * for a misspelling).  Returns the number of errors.
 */
static int check_across(struct rules_file *files, int n_files, int *n_rules)
{
	struct rule_ref *refs = calloc(MAX_RULES, sizeof(*refs));
	const cJSON *r;
	int i, j, n = 0, errors = 0;

	if (!refs) {
		fprintf(stderr, "sm120 rules: out of memory\n");
		return 1;
	}
	for (i = 0; i < n_files; i++) {
		const cJSON *rules = cJSON_GetObjectItemCaseSensitive(files[i].root, "rules");
		int index = 0;

		if (!cJSON_IsArray(rules))
			continue;
		cJSON_ArrayForEach(r, rules) {
			char fallback[32];

			snprintf(fallback, sizeof(fallback), "rules[%d]", index++);
			if (!cJSON_IsObject(r))
				continue;
			if (n == MAX_RULES) {
				complain(&files[i], NULL, r, "more than %d rules over all files",
					 MAX_RULES);
				break;
			}
			refs[n] = (struct rule_ref){
				.f = &files[i], .r = r,
				.tiles = cJSON_GetObjectItemCaseSensitive(r, "tiles"),
				.values = cJSON_GetObjectItemCaseSensitive(r, "values"),
				.id = string_of(r, "id"), .adapter = string_of(r, "adapter"),
			};
			rule_label(r, fallback, refs[n].label, sizeof(refs[n].label));
			if (!cJSON_IsArray(refs[n].tiles))
				refs[n].tiles = NULL;
			if (!cJSON_IsObject(refs[n].values))
				refs[n].values = NULL;
			n++;
		}
	}
	for (i = 0; i < n; i++) {
		const struct rule_ref *a = &refs[i];

		for (j = 0; a->id && j < i; j++)
			if (refs[j].id && strcmp(refs[j].id, a->id) == 0) {
				complain(a->f, a->label, cJSON_GetObjectItemCaseSensitive(a->r, "id"),
					 "id: used by another rule at %s:%d (ids are unique over all "
					 "files)", refs[j].f->path,
					 node_line(refs[j].f, cJSON_GetObjectItemCaseSensitive(refs[j].r,
											"id")));
				break;
			}
		if (one_of(a->adapter, adapters, COUNT(adapters)))
			check_names(refs, n, a);
	}
	for (i = 0; i < n_files; i++)
		errors += files[i].errors;
	*n_rules = n;
	free(refs);
	return errors;
}

/* load - read and parse @f, check it against the schema and each rule on its own. */
static void load(struct rules_file *f)
{
	FILE *in = fopen(f->path, "rb");
	struct walk w = { f, NULL };
	const cJSON *r, *rules;
	const char *end = NULL;
	size_t n = 0;
	int i = 0;

	f->text = malloc(MAX_RULE_BYTES + 1);
	if (in && f->text)
		n = fread(f->text, 1, MAX_RULE_BYTES + 1, in);
	if (!in || !f->text || ferror(in)) {
		fprintf(stderr, "sm120 rules: %s: cannot read: %s\n", f->path, strerror(errno));
		if (in)
			fclose(in);
		f->errors++;
		return;
	}
	fclose(in);
	if (n > MAX_RULE_BYTES) {
		fprintf(stderr, "sm120 rules: %s: larger than %u bytes\n", f->path, MAX_RULE_BYTES);
		f->errors++;
		return;
	}
	f->text[n] = '\0';
	f->root = cJSON_ParseWithOpts(f->text, &end, 1);
	if (!f->root) {
		fprintf(stderr, "sm120 rules: %s:%d: not valid JSON near '%.20s'\n", f->path,
			end ? text_line(f->text, end) : 0, end ? end : "");
		f->errors++;
		return;
	}
	index_lines(f);
	check_value(&w, f->root, &file_root, "");
	rules = cJSON_GetObjectItemCaseSensitive(f->root, "rules");
	if (!cJSON_IsArray(rules))
		return;
	cJSON_ArrayForEach(r, rules) {
		if (cJSON_IsObject(r))
			check_rule(f, r, i);
		i++;
	}
}

/* check_files - load and check @files[0..n) (one code path for check and compile); errors. */
static int check_files(struct rules_file *files, int n, int *n_rules)
{
	int i;

	for (i = 0; i < n; i++)
		load(&files[i]);
	return check_across(files, n, n_rules);
}

/* ---------------------------------------------------------------- compile */

/* c_string - @s as a C string literal. */
static void c_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			fprintf(out, "\\%03o", (unsigned char)*s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

/* emit_values - a struct rule_value array named @name from @obj (skipping @skip). */
static int emit_values(FILE *out, const char *name, const cJSON *obj, const char *skip)
{
	const cJSON *v;
	int n = 0;

	fprintf(out, "static const struct rule_value %s[] = {\n", name);
	cJSON_ArrayForEach(v, obj) {
		if (skip && strcmp(v->string, skip) == 0)
			continue;
		fputs("\t{ ", out);
		c_string(out, v->string);
		fprintf(out, ", %.17g },\n", cJSON_IsBool(v) ? (double)cJSON_IsTrue(v) : v->valuedouble);
		n++;
	}
	if (!n)
		fputs("\t{ 0 },\n", out);
	fputs("};\n", out);
	return n;
}

/* number_or - @key of @obj as a whole number, @def when absent. */
static long long number_or(const cJSON *obj, const char *key, long long def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNumber(v) ? (long long)v->valuedouble : def;
}

/* emit_generic - rule @k's struct rule_generic (generic_@k) from @g, or GENERIC_@k NULL. */
static void emit_generic(FILE *out, const cJSON *g, int k)
{
	const cJSON *compiled = cJSON_GetObjectItemCaseSensitive(g, "compiled"), *b, *v;
	int i = 0;

	if (!cJSON_IsObject(g)) {
		fprintf(out, "#define GENERIC_%d NULL\n", k);
		return;
	}
	cJSON_ArrayForEach(b, compiled) {
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(b, "one_of");

		if (!list)
			continue;
		fprintf(out, "static const int64_t one_of_%d_%d[] = { ", k, i);
		cJSON_ArrayForEach(v, list)
			fprintf(out, "%.0f, ", v->valuedouble);
		fputs("};\n", out);
		i++;
	}
	fprintf(out, "static const struct rule_bound bounds_%d[] = {\n", k);
	i = 0;
	cJSON_ArrayForEach(b, compiled) {
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(b, "one_of");
		const char *divides = string_of(b, "divides"), *why = string_of(b, "why");

		fputs("\t{ ", out);
		c_string(out, b->string);
		fprintf(out, ", %lld, %lld, %lld, ", number_or(b, "min", 0), number_or(b, "max", 0),
			number_or(b, "multiple_of", 1));
		if (list)
			fprintf(out, "one_of_%d_%d, %d, ", k, i++, cJSON_GetArraySize(list));
		else
			fputs("NULL, 0, ", out);
		if (divides)
			c_string(out, divides);
		else
			fputs("NULL", out);
		fputs(", ", out);
		if (why)
			c_string(out, why);
		else
			fputs("NULL", out);
		fputs(" },\n", out);
	}
	fprintf(out, "};\nstatic const struct rule_generic generic_%d = { ", k);
	c_string(out, string_of(g, "shared_memory"));
	fprintf(out, ", bounds_%d, %d };\n#define GENERIC_%d (&generic_%d)\n", k,
		cJSON_GetArraySize(compiled), k, k);
}

static void emit_rule(FILE *out, const cJSON *r, int k)
{
	static const char *const type_enum[] = { [RULE_PTR] = "RULE_PTR", [RULE_I64] = "RULE_I64",
						  [RULE_I32] = "RULE_I32", [RULE_FP32] = "RULE_FP32",
						  [RULE_U1] = "RULE_U1" };
	const cJSON *p, *t, *s;
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(r, "params");
	const cJSON *tiles = cJSON_GetObjectItemCaseSensitive(r, "tiles");
	const cJSON *set = cJSON_GetObjectItemCaseSensitive(r, "settings");
	char name[64];
	int i = 0, nv;

	fprintf(out, "\n/* %s */\nstatic const struct rule_param params_%d[] = {\n",
		cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "id")), k);
	cJSON_ArrayForEach(p, params) {
		const char *drop = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "dropped_when"));

		fputs("\t{ ", out);
		c_string(out, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "name")));
		fprintf(out, ", %s, %s, %d },\n",
			type_enum[rule_type_parse(
				cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "type")))],
			!drop ? "RULE_KEPT" : strcmp(drop, "none") == 0 ? "RULE_DROP_NONE" :
			strcmp(drop, "one") == 0 ? "RULE_DROP_ONE" : "RULE_DROP_ALWAYS",
			cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(p, "supported")));
	}
	fputs("};\n", out);
	cJSON_ArrayForEach(t, tiles) {
		snprintf(name, sizeof(name), "tile_values_%d_%d", k, i++);
		emit_values(out, name, t, "dynamic_smem");
	}
	fprintf(out, "static const struct rule_tile tiles_%d[] = {\n", k);
	i = 0;
	cJSON_ArrayForEach(t, tiles)
		fprintf(out, "\t{ %.0f, tile_values_%d_%d, %d },\n",
			cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(t, "dynamic_smem")), k, i,
			cJSON_GetArraySize(t) - 1), i++;
	fputs("};\n", out);
	snprintf(name, sizeof(name), "values_%d", k);
	nv = emit_values(out, name, cJSON_GetObjectItemCaseSensitive(r, "values"), NULL);
	fprintf(out, "static const char *const settings_%d[] = { ", k);
	cJSON_ArrayForEach(s, set) {
		c_string(out, cJSON_GetStringValue(s));
		fputs(", ", out);
	}
	fprintf(out, "NULL };\n#define VALUES_%d %d\n", k, nv);
	emit_generic(out, cJSON_GetObjectItemCaseSensitive(r, "generic"), k);
}

static int compile(const char *out_path, struct rules_file *files, int n)
{
	FILE *out = fopen(out_path, "w");
	const cJSON *r;
	int i, k = 0;

	if (!out) {
		fprintf(stderr, "sm120 rules: cannot write %s: %s\n", out_path, strerror(errno));
		return 1;
	}
	fputs("/* Generated by `sm120 rules compile` from the rules files: do not edit. */\n"
	      "#include <stddef.h>\n\n#include \"rules/rules.h\"\n", out);
	for (i = 0; i < n; i++)
		cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(files[i].root, "rules"))
			emit_rule(out, r, k++);
	fputs("\nconst struct rule rules_builtin[] = {\n", out);
	k = 0;
	for (i = 0; i < n; i++)
		cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(files[i].root, "rules")) {
			static const char *const keys[] = { "id", "kernel", "adapter", "source" };
			size_t j;

			fputs("\t{ ", out);
			for (j = 0; j < COUNT(keys); j++) {
				c_string(out, cJSON_GetStringValue(
						      cJSON_GetObjectItemCaseSensitive(r, keys[j])));
				fputs(", ", out);
			}
			fprintf(out, "params_%d, %d, tiles_%d, %d, values_%d, VALUES_%d, settings_%d, "
				"%d, GENERIC_%d, %d },\n", k,
				cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "params")), k,
				cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "tiles")), k, k, k,
				cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "settings")), k,
				cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "needs_compiled_facts")));
			k++;
		}
	if (!k)
		fputs("\t{ 0 },\n", out);
	fprintf(out, "};\n\nconst uint32_t rules_builtin_count = %d;\n", k);
	return fclose(out) == 0 ? 0 : 1;
}

static void usage(FILE *out)
{
	char names[512];

	fputs("usage: sm120 rules check FILE...\n"
	      "       sm120 rules compile -o OUT.c FILE...\n"
	      "  check    check reroute rules against the schema in rules/README.md: every key,\n"
	      "           its type and range; each error names the file, line, rule, field and\n"
	      "           what is accepted.  Exit 0 clean, 1 errors, 2 usage.\n"
	      "  compile  the same check; only when it passes, write the C table the shim is\n"
	      "           built with\n", out);
	fprintf(out, "adapters: %s\n", names_list(names, sizeof(names), adapters, COUNT(adapters)));
	fprintf(out, "settings: %s\n",
		names_list(names, sizeof(names), rule_setting_names, RULE_NSETTINGS));
	fprintf(out, "shared-memory models (generic.shared_memory): %s\n",
		names_list(names, sizeof(names), rule_smem_model_names, RULE_NSMEM_MODELS));
}

/* usage_error - "sm120 rules: " @fmt, then the usage, on stderr; returns 2. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("sm120 rules: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	return 2;
}

/*
 * cmd_rules - `sm120 rules check|compile` (argv[1] is check or compile): both check
 * every file through check_files(); compile writes OUT.c only when that finds
 * nothing.  Returns 0 clean, 1 errors (or OUT.c not written), 2 usage.
 */
int cmd_rules(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "output", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	struct rules_file files[MAX_RULE_FILES] = { 0 };
	const char *out = NULL;
	char **args = argv + 1; /* args[0] is check or compile */
	int compile_it, c, n, i, errors, n_rules = 0;

	if (argc < 2)
		return usage_error("check or compile?");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	compile_it = strcmp(argv[1], "compile") == 0;
	if (!compile_it && strcmp(argv[1], "check") != 0)
		return usage_error("unknown subcommand '%s'", argv[1]);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, args, compile_it ? ":ho:" : ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'o':
			if (compile_it) {
				out = optarg;
				break;
			}
			return usage_error("rules check writes nothing: -o is for rules compile");
		case ':':
			return usage_error("%s needs a file name", args[optind - 1]);
		default:
			return usage_error("unknown option '%s'", args[optind - 1]);
		}
	}
	n = argc - 1 - optind;
	if (compile_it && !out)
		return usage_error("rules compile needs -o OUT.c");
	if (n < 1 || n > MAX_RULE_FILES)
		return usage_error("give 1 to %d rules files", MAX_RULE_FILES);
	if (rules_init() != 0)
		return 2;
	for (i = 0; i < n; i++)
		files[i].path = args[optind + i];
	errors = check_files(files, n, &n_rules);
	if (!errors && out)
		errors = compile(out, files, n);
	else if (!errors)
		printf("%d rules in %d files: no errors\n", n_rules, n);
	for (i = 0; i < n; i++) {
		cJSON_Delete(files[i].root);
		free(files[i].text);
		free(files[i].nodes);
		free(files[i].lines);
	}
	return errors ? 1 : 0;
}
