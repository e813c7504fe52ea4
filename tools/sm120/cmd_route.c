/*
 * cmd_route.c - `sm120 route`: replay the launches and attribute sets of shim
 * logs through route_decide, the function the shim's gate calls, and say what
 * it decides and whether that is what the shim logged.
 *
 * A log event carries what the decision needs: the kernel's name, static and
 * dynamic bytes, parameter sizes and values ("args"), grid, block, the rule
 * settings in force, the mode and the target, what Triton compiled into the
 * kernel when the Python hook saw it load ("compiled", core/rules/compiled.h;
 * without it the decision is the one without facts); under an emulated target also
 * the evidence of where the kernel's code came from (device, image kind and
 * codes, file, loader and its codes), so a library kernel replays as one.  The rules are the ones this
 * program was built with (rules/ at build time), as in the shim beside it.
 * --mode, --target and --set replace the logged values: "what would this
 * process have got under enforce, or with page_size 16?".
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/route/route.h"
#include "../../core/rules/rules.h"
#include "commands.h"
#include "jsonl.h"

#define MAX_ARG_BYTES 8   /* the widest kernel parameter a rule reads */

static const char *usage_text =
	"usage: sm120 route [--json] [--mode M] [--target T] [--set NAME=VALUE]... [LOG|-]...\n"
	"\n"
	"Replays every launch and attribute-set event of shim logs (SM120SHIM_LOG;\n"
	"- or none: stdin) through the shim's own decision, with the rules this\n"
	"program was built with, and prints the decision next to the logged one.\n"
	"  --json          one JSON object per event instead of a line\n"
	"  --mode M        decide as under this mode (default: each event's own)\n"
	"  --target T      a profile (sm120, sm90, ...) or opt-in bytes (default: each\n"
	"                  event's target, or its logged limit)\n"
	"  --set N=V       a rule setting (kv_cache_dtype, page_size, top_k, hidden_size)\n"
	"                  over the event's own\n"
	"Exit: 0 every replayed decision equals the logged one, 1 some differ or could\n"
	"not be replayed, 2 bad usage or unreadable input.\n";

struct options {
	int json;
	int overrides;                     /* --mode, --target or --set given: nothing to compare */
	int mode;                          /* -1: the event's */
	int have_target;
	struct target_limits target;
	const char *set[RULE_NSETTINGS];   /* --set values, NULL: the event's */
};

struct replay {
	const struct options *o;
	unsigned long events, agree, differ, unreplayable;
	const char *path;
	const cJSON *settings;             /* the current event's "settings" object */
};

static struct replay *current;         /* for setting(): adapters take no context */

/* setting - a rule setting for the adapters: --set, else the event's. */
static const char *setting(const char *name)
{
	int i = rule_setting_index(name, strlen(name));

	if (i < 0)
		return NULL;
	if (current->o->set[i])
		return current->o->set[i];
	return jsonl_str(current->settings, name);
}

/* hex_bytes - decode @hex (2 * @n digits) into @out; 0, or -EINVAL. */
static int hex_bytes(const char *hex, unsigned char *out, size_t n)
{
	size_t i;

	if (!hex || strlen(hex) != 2 * n)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -EINVAL;
		out[i] = (unsigned char)b;
	}
	return 0;
}

/* dims - a three-number array member ("grid", "block"); 0, or -EINVAL. */
static int dims(const cJSON *j, const char *key, unsigned int out[3])
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key), *v;
	int i = 0;

	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
		return -EINVAL;
	cJSON_ArrayForEach(v, a) {
		if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 4294967295.0)
			return -EINVAL;
		out[i++] = (unsigned int)v->valuedouble;
	}
	return 0;
}

/* The parameters of one launch event, decoded. */
struct launch_args {
	uint32_t sizes[RULE_MAX_PARAMS];
	unsigned char bytes[RULE_MAX_PARAMS][MAX_ARG_BYTES];
	void *params[RULE_MAX_PARAMS];
	uint32_t n;
	int have_values;
};

/* read_args - "param_sizes" and "args"; 0, or -EINVAL with @why. */
static int read_args(const cJSON *j, struct launch_args *a, struct sm_err *why)
{
	const cJSON *sizes = cJSON_GetObjectItemCaseSensitive(j, "param_sizes");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "args"), *v;

	a->n = 0;
	a->have_values = args != NULL;
	cJSON_ArrayForEach(v, sizes) {
		if (a->n == RULE_MAX_PARAMS || !cJSON_IsNumber(v) || v->valuedouble < 1 ||
		    v->valuedouble > 4096)
			return sm_err_set(why, -EINVAL, "\"param_sizes\" is not a list of at most %d "
					  "sizes", RULE_MAX_PARAMS);
		a->sizes[a->n++] = (uint32_t)v->valuedouble;
	}
	if (!args)
		return 0;
	if (!cJSON_IsArray(args) || (uint32_t)cJSON_GetArraySize(args) != a->n)
		return sm_err_set(why, -EINVAL, "\"args\" does not have one value per parameter "
				  "size (%u)", a->n);
	for (uint32_t i = 0; i < a->n; i++) {
		const char *hex = cJSON_GetStringValue(cJSON_GetArrayItem(args, (int)i));

		a->params[i] = a->bytes[i];
		if (a->sizes[i] > MAX_ARG_BYTES) {
			a->params[i] = NULL; /* a by-value struct no rule reads */
			continue;
		}
		if (hex_bytes(hex, a->bytes[i], a->sizes[i]))
			return sm_err_set(why, -EINVAL, "args[%u] is not %u bytes in hex", i,
					  a->sizes[i]);
	}
	return 0;
}

/* Where a logged kernel's code came from, decoded for route_decide. */
struct logged_evidence {
	struct route_evidence e;
	struct evidence_codes codes, loader_codes;
};

/*
 * read_evidence - the evidence fields of @j into @ev; NULL when the event has
 * none (the device was the target, or the log predates them).  Sets @why and
 * returns NULL for fields that do not parse (@bad set to 1).
 */
static const struct route_evidence *read_evidence(const cJSON *j, struct logged_evidence *ev,
						  int *bad, struct sm_err *why)
{
	const char *device = jsonl_str(j, "device"), *codes = jsonl_str(j, "image_codes");
	const char *loader_codes = jsonl_str(j, "loader_codes");
	int sm = 0;
	char end;

	*bad = 0;
	if (!device && !jsonl_str(j, "evidence"))
		return NULL;
	if (device && (sscanf(device, "sm_%d%c", &sm, &end) != 1 || sm <= 0)) {
		*bad = 1;
		sm_err_set(why, -EINVAL, "\"device\" is '%s', not sm_<number>", device);
		return NULL;
	}
	if (evidence_codes_parse(codes, &ev->codes, why) ||
	    evidence_codes_parse(loader_codes, &ev->loader_codes, why)) {
		*bad = 1;
		return NULL;
	}
	ev->e = (struct route_evidence){
		.device_sm = sm, .image = evidence_image_parse(jsonl_str(j, "image")),
		.origin = jsonl_str(j, "origin"), .codes = codes ? &ev->codes : NULL,
		.file = jsonl_str(j, "image_file"), .loader = jsonl_str(j, "loader"),
		.loader_codes = loader_codes ? &ev->loader_codes : NULL,
		.runtime_compiled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j,
										  "runtime_compiled")),
	};
	return &ev->e;
}

/* event_target - the limits the event was judged against. */
static int event_target(const struct options *o, const cJSON *j, struct target_limits *t,
			struct sm_err *why)
{
	const char *name = jsonl_str(j, "target");
	int64_t limit = jsonl_num(j, "limit");
	char bytes[32];

	if (o->have_target) {
		*t = o->target;
		return 0;
	}
	if (name && target_parse(name, t, NULL) == 0)
		return 0;
	if (limit < 0)
		return sm_err_set(why, -EINVAL, "no usable \"target\" or \"limit\": pass --target");
	snprintf(bytes, sizeof(bytes), "%lld", (long long)limit);
	return target_parse(bytes, t, why);
}

/*
 * print - one line (or JSON object) for the decision @d on event @j; @logged
 * is the logged decision it is compared with (NULL: not compared).
 */
static void print(const struct replay *r, const cJSON *j, const char *event,
		  const struct route_decision *d, const char *logged, int agrees)
{
	const char *kernel = jsonl_str(j, "kernel");
	const char *action = route_action_name(d->action);

	if (r->o->json) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "log", r->path);
		cJSON_AddStringToObject(o, "event", event);
		cJSON_AddStringToObject(o, "kernel", kernel ? kernel : "?");
		cJSON_AddStringToObject(o, "decision", action);
		if (d->rule) {
			cJSON_AddStringToObject(o, "rule", d->rule->id);
			cJSON_AddStringToObject(o, "rerouted_to", d->plan.kernel);
		}
		if (d->why.msg[0])
			cJSON_AddStringToObject(o, "reason", d->why.msg);
		if (d->evidence.msg[0])
			cJSON_AddStringToObject(o, "evidence", d->evidence.msg);
		if (logged) {
			cJSON_AddStringToObject(o, "logged", logged);
			cJSON_AddBoolToObject(o, "agrees", agrees);
		}
		jsonl_print(o);
		return;
	}
	printf("%s %s: %s%s%s%s%s (logged: %s)%s\n", event, kernel ? kernel : "?", action,
	       d->rule ? " by " : "", d->rule ? d->rule->id : "", d->rule ? " to " : "",
	       d->rule ? d->plan.kernel : "", logged ? logged : "not compared",
	       agrees ? "" : "  <- differs");
	if (d->why.msg[0])
		printf("    why: %s\n", d->why.msg);
	if (d->evidence.msg[0])
		printf("    evidence: %s\n", d->evidence.msg);
}

static int on_event(void *ctx, const cJSON *j, const char *event)
{
	struct replay *r = ctx;
	const char *mode_name = jsonl_str(j, "mode");
	const char *logged = jsonl_str(j, "decision");
	struct route_launch l = { .event = ROUTE_EVENT_LAUNCH };
	struct logged_evidence ev;
	struct launch_args a;
	struct route_decision d;
	struct target_limits t;
	struct sm_err why = { "" };
	int mode = r->o->mode >= 0 ? r->o->mode : route_mode_parse(mode_name), agrees, bad;
	int64_t st = jsonl_num(j, "static_smem"), dyn = jsonl_num(j, "dynamic_smem"), sms;

	if (strcmp(event, "launch") != 0 && strcmp(event, "set_attribute") != 0)
		return 0;
	r->events++;
	if (!logged)
		logged = jsonl_str(j, "action"); /* logs written before "decision" existed */
	l.evidence = read_evidence(j, &ev, &bad, &why);
	if (mode < 0 || st < 0 || dyn < 0 || bad || event_target(r->o, j, &t, &why) ||
	    read_args(j, &a, &why) ||
	    (strcmp(event, "launch") == 0 &&
	     (dims(j, "grid", l.sel.grid) || dims(j, "block", l.sel.block)))) {
		fprintf(stderr, "sm120 route: %s: %s event of %s cannot be replayed: %s\n", r->path,
			event, jsonl_str(j, "kernel") ?: "?",
			why.msg[0] ? why.msg : "it lacks \"mode\", \"static_smem\", \"dynamic_smem\", "
					       "\"grid\" or \"block\"");
		r->unreplayable++;
		return 0;
	}
	l.static_smem = (uint32_t)st;
	l.sel.kernel = jsonl_str(j, "kernel");
	l.sel.param_sizes = a.sizes;
	l.sel.n_params = a.n;
	l.sel.params = a.have_values ? a.params : NULL;
	l.sel.setting = setting;
	l.sel.compiled = jsonl_str(j, "compiled"); /* what Triton compiled in, or NULL */
	sms = jsonl_num(j, "sms");                 /* the device's multiprocessors, if logged */
	l.sel.sms = sms > 0 && sms <= INT32_MAX ? (int)sms : 0;
	if (strcmp(event, "set_attribute") == 0) {
		l.event = ROUTE_EVENT_SET_ATTRIBUTE;
		l.attr_value = dyn;
	} else {
		l.sel.dynamic_smem = (uint64_t)dyn;
	}
	r->settings = cJSON_GetObjectItemCaseSensitive(j, "settings");
	current = r;
	route_decide(&l, &t, (enum shim_mode)mode, rules_builtin, rules_builtin_count,
		     (uint32_t)rules_max_dynamic(rules_builtin, rules_builtin_count), &d);
	if (l.event == ROUTE_EVENT_LAUNCH && !a.have_values && d.rule == NULL && d.why.msg[0] &&
	    strstr(d.why.msg, "'extra'")) {
		fprintf(stderr, "sm120 route: %s: the launch of %s has no \"args\" in the log (the "
			"kernel's facts were unknown): its rule cannot be replayed\n", r->path,
			l.sel.kernel ? l.sel.kernel : "?");
		r->unreplayable++;
		return 0;
	}
	if (r->o->overrides)
		logged = NULL; /* decided under other conditions than the shim's */
	agrees = !logged || strcmp(logged, route_action_name(d.action)) == 0;
	r->agree += logged && agrees;
	r->differ += !agrees;
	print(r, j, event, &d, logged, agrees);
	return 0;
}

/* set_option - --set NAME=VALUE into @o; 0, or -1 after saying what is accepted. */
static int set_option(struct options *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	int row = eq && eq[1] ? rule_setting_index(arg, (size_t)(eq - arg)) : -1;
	int i;

	if (row >= 0) {
		o->set[row] = eq + 1;
		return 0;
	}
	fprintf(stderr, "sm120 route: --set takes NAME=VALUE with NAME one of");
	for (i = 0; i < RULE_NSETTINGS; i++)
		fprintf(stderr, " %s", rule_setting_names[i]);
	fprintf(stderr, ", not '%s'\n", arg);
	return -1;
}

int cmd_route(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },   { "mode", required_argument, NULL, 'm' },
		{ "target", required_argument, NULL, 't' }, { "set", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },   { NULL, 0, NULL, 0 },
	};
	struct options o = { .mode = -1 };
	struct replay r = { .o = &o };
	struct jsonl_counts io = { 0 };
	struct sm_err err;
	int c, i;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.json = 1;
			break;
		case 'm':
			o.mode = route_mode_parse(optarg);
			if (o.mode < 0) {
				fprintf(stderr, "sm120 route: --mode takes off, diagnose, enforce or "
					"reroute, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 't':
			if (target_parse(optarg, &o.target, &err)) {
				fprintf(stderr, "sm120 route: --target: %s\n", err.msg);
				return 2;
			}
			o.have_target = 1;
			break;
		case 's':
			if (set_option(&o, optarg))
				return 2;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	o.overrides = o.mode >= 0 || o.have_target;
	for (i = 0; i < RULE_NSETTINGS; i++)
		o.overrides |= o.set[i] != NULL;
	for (i = optind; i < argc; i++) {
		r.path = argv[i];
		jsonl_read(r.path, "sm120 route", on_event, &r, &io);
	}
	if (optind == argc) {
		r.path = "-";
		jsonl_read(r.path, "sm120 route", on_event, &r, &io);
	}
	if (!o.json && o.overrides)
		printf("%lu events replayed under --mode/--target/--set (not compared with the "
		       "log), %lu could not be replayed\n", r.events, r.unreplayable);
	else if (!o.json)
		printf("%lu events replayed: %lu as logged, %lu differ, %lu could not be replayed\n",
		       r.events, r.agree, r.differ, r.unreplayable);
	if (io.bad_files || io.bad_lines)
		return 2;
	return r.differ || r.unreplayable ? 1 : 0;
}
