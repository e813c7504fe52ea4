/*
 * cmd_rules.c - `sm120 rules check|compile`: the reroute rules in rules/.
 *
 *   sm120 rules check FILE...            validate; exit 0 clean, 1 errors
 *   sm120 rules compile -o OUT.c FILE... validate, then write the C table the
 *                                        shim is built with (rules.h)
 *
 * The schema is in rules/README.md.  Every error names the file, the line of
 * the rule it is in (or of a JSON syntax error), the field and what is
 * accepted; checking goes on past an error so one run lists them all.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/adapters/adapter_table.h"
#include "../../core/rules/rules.h"
#include "commands.h"

#define MAX_RULE_FILES 64
#define MAX_RULE_BYTES (4u << 20)

static const char *const adapters[] = {
#define ADAPTER_NAME(name, what) #name,
	SHIM_ADAPTERS(ADAPTER_NAME)
#undef ADAPTER_NAME
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* One rules file being checked. */
struct rules_file {
	const char *path;
	char *text;
	cJSON *root;
	int errors;
};

/* line_of - 1-based line of @at in @text (which must contain it). */
static int line_of(const char *text, const char *at)
{
	int line = 1;

	for (; text < at; text++)
		line += *text == '\n';
	return line;
}

/* rule_line - the line where rule @id is written (its "id" value), or 0. */
static int rule_line(const struct rules_file *f, const char *id)
{
	char needle[300];
	const char *at;

	snprintf(needle, sizeof(needle), "\"%s\"", id ? id : "");
	at = id ? strstr(f->text, needle) : NULL;
	return at ? line_of(f->text, at) : 0;
}

static void complain(struct rules_file *f, const char *id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void complain(struct rules_file *f, const char *id, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sm120 rules: %s:%d: ", f->path, rule_line(f, id));
	if (id)
		fprintf(stderr, "rule '%s': ", id);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	f->errors++;
}

static int one_of(const char *s, const char *const *names, size_t n)
{
	size_t i;

	for (i = 0; s && i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return 1;
	return 0;
}

/* names_list - "a, b, c" for messages (static buffer). */
static const char *names_list(const char *const *names, size_t n)
{
	static char buf[512];
	size_t i, o = 0;

	buf[0] = '\0';
	for (i = 0; i < n && o < sizeof(buf); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i ? ", " : "", names[i]);
	return buf;
}

/* string_field - @obj's string @key, or NULL after complaining. */
static const char *string_field(struct rules_file *f, const char *id, const cJSON *obj,
				const char *key, const char *where)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (cJSON_IsString(v) && v->valuestring[0])
		return v->valuestring;
	complain(f, id, "%s%s\"%s\": missing or not a non-empty string", where, *where ? "." : "",
		 key);
	return NULL;
}

/* check_values - an object of numbers (booleans as 0/1). */
static void check_values(struct rules_file *f, const char *id, const cJSON *obj, const char *where)
{
	const cJSON *v;

	if (!obj)
		return;
	if (!cJSON_IsObject(obj)) {
		complain(f, id, "%s: must be an object of numbers", where);
		return;
	}
	cJSON_ArrayForEach(v, obj)
		if (!cJSON_IsNumber(v) && !cJSON_IsBool(v))
			complain(f, id, "%s.%s: must be a number", where, v->string);
}

static void check_params(struct rules_file *f, const char *id, const cJSON *params)
{
	const cJSON *p, *q;
	int i = 0;

	if (!cJSON_IsArray(params) || cJSON_GetArraySize(params) == 0 ||
	    cJSON_GetArraySize(params) > RULE_MAX_PARAMS) {
		complain(f, id, "params: must be an array of 1 to %d parameters", RULE_MAX_PARAMS);
		return;
	}
	cJSON_ArrayForEach(p, params) {
		char where[64];
		const char *name, *type, *drop;
		const cJSON *sup = cJSON_GetObjectItemCaseSensitive(p, "supported");
		int t, j = 0;

		snprintf(where, sizeof(where), "params[%d]", i++);
		name = string_field(f, id, p, "name", where);
		type = string_field(f, id, p, "type", where);
		drop = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "dropped_when"));
		t = type ? rule_type_parse(type) : RULE_PTR;
		if (t < 0)
			complain(f, id, "%s.type: '%s' is not ptr, i64, i32, fp32 or u1", where, type);
		if (cJSON_GetObjectItemCaseSensitive(p, "dropped_when") && !drop)
			complain(f, id, "%s.dropped_when: must be \"none\", \"one\" or \"always\"", where);
		else if (drop && strcmp(drop, "none") != 0 && strcmp(drop, "one") != 0 &&
			 strcmp(drop, "always") != 0)
			complain(f, id, "%s.dropped_when: '%s' is not \"none\", \"one\" or \"always\"",
				 where, drop);
		else if (drop && strcmp(drop, "none") == 0 && t != RULE_PTR)
			complain(f, id, "%s: only a ptr is dropped when None", where);
		else if (drop && strcmp(drop, "none") != 0 && t != RULE_I32 && t != RULE_I64)
			complain(f, id, "%s: only an i32 or i64 is dropped when it is 1", where);
		if (sup && !cJSON_IsBool(sup))
			complain(f, id, "%s.supported: must be true or false", where);
		else if (sup && cJSON_IsFalse(sup) && !drop)
			complain(f, id, "%s.supported: false needs dropped_when (a parameter that is "
				 "always there cannot be refused)", where);
		cJSON_ArrayForEach(q, params) {
			if (q == p)
				break;
			j++;
			if (name && strcmp(name, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
						       q, "name")) ?: "") == 0)
				complain(f, id, "%s.name: '%s' is also params[%d]", where, name, j - 1);
		}
	}
}

static void check_tiles(struct rules_file *f, const char *id, const cJSON *tiles)
{
	const cJSON *t, *u;
	int i = 0;

	if (!cJSON_IsArray(tiles) || cJSON_GetArraySize(tiles) == 0) {
		complain(f, id, "tiles: must be a non-empty array (one per rerouted configuration)");
		return;
	}
	cJSON_ArrayForEach(t, tiles) {
		const cJSON *smem = cJSON_GetObjectItemCaseSensitive(t, "dynamic_smem");
		char where[32];

		snprintf(where, sizeof(where), "tiles[%d]", i++);
		if (!cJSON_IsNumber(smem) || smem->valuedouble < 1 ||
		    smem->valuedouble != floor(smem->valuedouble)) {
			complain(f, id, "%s.dynamic_smem: must be a positive whole number of bytes",
				 where);
			continue;
		}
		check_values(f, id, t, where);
		cJSON_ArrayForEach(u, tiles) {
			if (u == t)
				break;
			if (cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "dynamic_smem")) ==
			    smem->valuedouble)
				complain(f, id, "%s.dynamic_smem: %.0f is also an earlier tile's", where,
					 smem->valuedouble);
		}
	}
}

static void check_rule(struct rules_file *f, const cJSON *r, int index, const char **ids,
		       int *n_ids)
{
	char where[32];
	const char *id, *adapter;
	const cJSON *s, *set = cJSON_GetObjectItemCaseSensitive(r, "settings");
	int i;

	snprintf(where, sizeof(where), "rules[%d]", index);
	id = string_field(f, NULL, r, "id", where);
	for (i = 0; id && i < *n_ids; i++)
		if (strcmp(ids[i], id) == 0)
			complain(f, id, "id: used by another rule (ids are unique over all files)");
	if (id && *n_ids < 4096)
		ids[(*n_ids)++] = id;
	string_field(f, id, r, "kernel", "");
	string_field(f, id, r, "source", "");
	adapter = string_field(f, id, r, "adapter", "");
	if (adapter && !one_of(adapter, adapters, COUNT(adapters)))
		complain(f, id, "adapter: '%s' is not one of the shim's adapters (%s)", adapter,
			 names_list(adapters, COUNT(adapters)));
	check_params(f, id, cJSON_GetObjectItemCaseSensitive(r, "params"));
	check_tiles(f, id, cJSON_GetObjectItemCaseSensitive(r, "tiles"));
	check_values(f, id, cJSON_GetObjectItemCaseSensitive(r, "values"), "values");
	if (set && !cJSON_IsArray(set))
		complain(f, id, "settings: must be an array of names");
	cJSON_ArrayForEach(s, set)
		if (!one_of(cJSON_GetStringValue(s), rule_setting_names, RULE_NSETTINGS))
			complain(f, id, "settings: '%s' is not one of %s",
				 cJSON_GetStringValue(s) ?: "(not a string)",
				 names_list(rule_setting_names, RULE_NSETTINGS));
}

/* load - read and check @f; returns its error count. */
static int load(struct rules_file *f, const char **ids, int *n_ids)
{
	FILE *in = fopen(f->path, "rb");
	const cJSON *rules, *r, *schema;
	const char *end = NULL;
	size_t n;
	int i = 0;

	f->text = malloc(MAX_RULE_BYTES + 1);
	if (!in || !f->text) {
		fprintf(stderr, "sm120 rules: %s: cannot read: %s\n", f->path, strerror(errno));
		if (in)
			fclose(in);
		return ++f->errors;
	}
	n = fread(f->text, 1, MAX_RULE_BYTES + 1, in);
	fclose(in);
	if (n > MAX_RULE_BYTES) {
		fprintf(stderr, "sm120 rules: %s: larger than %u bytes\n", f->path, MAX_RULE_BYTES);
		return ++f->errors;
	}
	f->text[n] = '\0';
	f->root = cJSON_ParseWithOpts(f->text, &end, 1);
	if (!f->root) {
		fprintf(stderr, "sm120 rules: %s:%d: not valid JSON near '%.20s'\n", f->path,
			end ? line_of(f->text, end) : 0, end ? end : "");
		return ++f->errors;
	}
	schema = cJSON_GetObjectItemCaseSensitive(f->root, "schema");
	if (!cJSON_IsNumber(schema) || schema->valuedouble != 1)
		complain(f, NULL, "schema: must be 1 (the version rules/README.md describes)");
	rules = cJSON_GetObjectItemCaseSensitive(f->root, "rules");
	if (!cJSON_IsArray(rules) || cJSON_GetArraySize(rules) == 0)
		complain(f, NULL, "rules: must be a non-empty array");
	cJSON_ArrayForEach(r, rules)
		check_rule(f, r, i++, ids, n_ids);
	return f->errors;
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
				"%d },\n", k,
				cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "params")), k,
				cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "tiles")), k, k, k,
				cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "settings")));
			k++;
		}
	if (!k)
		fputs("\t{ 0 },\n", out);
	fprintf(out, "};\n\nconst uint32_t rules_builtin_count = %d;\n", k);
	return fclose(out) == 0 ? 0 : 1;
}

int cmd_rules(int argc, char **argv)
{
	static const char usage[] =
		"usage: sm120 rules check FILE...\n"
		"       sm120 rules compile -o OUT.c FILE...\n"
		"  check: validate reroute rules (schema in rules/README.md); exit 0 clean, 1 errors\n"
		"  compile: validate, then write the C table the shim is built with\n";
	struct rules_file files[MAX_RULE_FILES] = { 0 };
	const char *ids[4096], *out = NULL;
	int first = 2, n, i, errors = 0, n_ids = 0;

	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(usage, stdout);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "compile") == 0 && strcmp(argv[2], "-o") == 0) {
		out = argv[3];
		first = 4;
	} else if (argc < 3 || strcmp(argv[1], "check") != 0) {
		fputs(usage, stderr);
		return 2;
	}
	n = argc - first;
	if (n < 1 || n > MAX_RULE_FILES) {
		fputs(usage, stderr);
		return 2;
	}
	for (i = 0; i < n; i++) {
		files[i].path = argv[first + i];
		errors += load(&files[i], ids, &n_ids);
	}
	if (!errors && out)
		errors = compile(out, files, n);
	else if (!errors)
		printf("%d rules in %d files: no errors\n", n_ids, n);
	for (i = 0; i < n; i++) {
		cJSON_Delete(files[i].root);
		free(files[i].text);
	}
	return errors ? 1 : 0;
}
