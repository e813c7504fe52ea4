/*
 * cmd_patch_configs.c - `sm120 patch configs`: our SM120 fused-MoE config
 * tables (patches/configs/, tuned under SM120's limits) written where SGLang
 * and vLLM look them up, under the names they compute for the user's model
 * and tensor-parallel size.
 *
 *   sm120 patch configs --model DIR --tp N [--framework sglang|vllm]
 *                       [--site-packages DIR | --out DIR] [--triton-version X.Y.Z]
 *                       [--disable-shared-experts-fusion] [--dry-run]
 *
 * Both frameworks pick a fused-MoE Triton configuration per batch size from
 * a JSON file named after the layer's shape and the GPU
 * ("E=384,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,
 * dtype=fp8_w8a8,block_shape=[128, 128].json"), and fall back to a default
 * (on SM120, before SGLang PR #25665, one that does not fit) when none is
 * there.  Every fact below was read in the released packages (file:line in
 * SGLang 0.5.8 / 0.5.9 / 0.5.23 and vLLM 0.33.0); make test checks the
 * written files with the frameworks' own lookup functions
 * (tests/scripts/test_patch_configs.sh, tests/oracle/patch_configs.py).
 *
 * The model: config.json (its text_config for Kimi K2.5) gives the routed
 * and shared expert counts (n_routed_experts or num_experts,
 * n_shared_experts), top-k, hidden and moe_intermediate_size, and the
 * quantization: fp8 with weight_block_size (DeepSeek / Kimi K2 FP8 block),
 * compressed-tensors float-quantized per channel / tensor / block (GLM FP8),
 * compressed-tensors pack-quantized INT4 per group (Kimi K2-Thinking), or
 * none (bf16).  The table in patches/configs/ whose "shape" equals the
 * model's at that TP size is written under every SM120 device name, once
 * per framework; a shape without a table is refused, saying how to tune one.
 *
 * Exit: 0 written (or already there), 1 something refused (no table, a file
 * of other contents in the way, a file that cannot be written), 2 usage or
 * bad input (config.json, a table file, no framework found).
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/common/file.h"
#include "patch_site.h"

#define MAX_JSON_BYTES (16u << 20)
#define MAX_TABLES 64
#define TABLE_FORMAT "sm120-moe-table/1"

/*
 * The names SM120 GPUs give (torch.cuda.get_device_name, which SGLang's
 * get_device_name returns: sglang/srt/utils/common.py 0.5.8 :1892, 0.5.9
 * :1996, 0.5.23 :1020; NVML's nvmlDeviceGetName, which vLLM asks:
 * vllm/platforms/cuda.py :841).  The RTX PRO 6000 and GB10 names are the
 * frameworks' own: files shipped for them in vLLM 0.33.0
 * (model_executor/layers/fused_moe/configs: ..._Server_Edition,
 * ..._Workstation_Edition, NVIDIA_GB10) and SGLang 0.5.8-0.5.23
 * (..._Max-Q_Workstation_Edition, ..._Server_Edition, NVIDIA_GB10).  No
 * release ships a GeForce RTX 5090 file: its name follows the GeForce
 * spelling of the files they ship for NVIDIA_GeForce_RTX_4090.
 */
static const char *const sm120_devices[] = {
	"NVIDIA RTX PRO 6000 Blackwell Server Edition",
	"NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
	"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
	"NVIDIA GeForce RTX 5090",
	"NVIDIA GB10",
};
#define NDEVICES (sizeof(sm120_devices) / sizeof(sm120_devices[0]))

/* How the routed experts are stored: one row per scheme. */
enum quant { Q_BF16, Q_FP8_TENSOR, Q_FP8_CHANNEL, Q_FP8_BLOCK, Q_INT4_GROUP, NQUANTS };

static const struct quant_info {
	const char *key;   /* a table's "shape"."quant" */
	const char *dtype; /* the dtype part of the file name (get_config_dtype_str), "" none */
	const char *what;  /* for messages */
} quants[NQUANTS] = {
	/* sglang fused_moe_triton_config.py get_config_dtype_str (0.5.9 :271);
	 * vllm fused_moe/config.py _get_config_dtype_str :42 */
	[Q_BF16] = { "bf16", "", "bf16" },
	[Q_FP8_TENSOR] = { "fp8_tensor", "fp8_w8a8", "FP8 per tensor" },
	[Q_FP8_CHANNEL] = { "fp8_channel", "fp8_w8a8", "FP8 per channel" },
	[Q_FP8_BLOCK] = { "fp8_block", "fp8_w8a8", "FP8 block" },
	[Q_INT4_GROUP] = { "int4_group", "int4_w4a16", "INT4 W4A16 per group" },
};

/* What the frameworks read of a model for their fused-MoE layer. */
struct moe_model {
	char arch[128];  /* architectures[0] */
	char model_type[64];
	long routed, shared, top_k, hidden, inter;
	enum quant quant;
	long block_n, block_k; /* Q_FP8_BLOCK */
	long group;            /* Q_INT4_GROUP */
};

/* One table of patches/configs/. */
struct moe_table {
	char path[PATH_MAX];
	char provenance[512];
	enum quant quant;
	long block_n, block_k, group;
	long routed, top_k, hidden, inter; /* inter: per tensor-parallel partition */
	cJSON *root;
	const cJSON *configs;
};

/* The options of one run. */
struct opts {
	const char *model, *only, *site, *out, *triton;
	long tp;
	int no_fusion, dry_run;
};

/* One framework's naming of config files and where it reads them. */
struct naming {
	const char *name;
	/* The module holding the lookup, relative to site-packages, newest layout
	 * first; its configs/ directory lies beside it. */
	const char *lookup[2];
	/* Code its lookup must hold for the names below to be what it reads. */
	const char *markers[4];
	const char *env;    /* the directory variable that replaces the package's */
	int triton_dir;     /* configs/triton_X_Y_Z/ (SGLang) */
	int block_spaced;   /* "[128, 128]" (SGLang: str(list)) or "[128,128]" (vLLM) */
	int per_channel;    /* ",per_channel_quant=True" in the name (SGLang) */
	int fuses_shared;   /* shared experts as extra routed slots (SGLang) */
	int n_packed_int4;  /* N is w2's packed last dimension, I / 2, for INT4 */
	const char *int4_note;
	const char *env_note;
};

static const struct naming namings[] = {
	{
		.name = "sglang",
		/* 0.5.23: moe_runner/triton_utils/; 0.5.8, 0.5.9: fused_moe_triton/ */
		.lookup = { "sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py",
			    "sglang/srt/layers/moe/fused_moe_triton/fused_moe_triton_config.py" },
		/* get_config_file_name and get_moe_configs (0.5.9 :19-34, :76-87;
		 * 0.5.23 :36-51, :91-102) */
		.markers = { "get_device_name().replace(\" \", \"_\")",
			     "f\",block_shape={block_shape}\"",
			     "\",per_channel_quant=True\"",
			     "triton_version.replace('.', '_')" },
		.env = "SGLANG_MOE_CONFIG_DIR",
		.triton_dir = 1,
		.block_spaced = 1,
		.per_channel = 1,
		.fuses_shared = 1,
		/* try_get_optimal_moe_config: E, _, N = w2_shape (0.5.9 :223, 0.5.23
		 * :284), w2 packed [E, hidden, I / 2] uint8 for INT4
		 * (compressed_tensors_wNa16_moe.py 0.5.9 :427-429, 0.5.23 :518-521) */
		.n_packed_int4 = 1,
		.int4_note = "SGLang reads it when it runs W4A16 experts on Triton: 0.5.23 with "
			     "--moe-runner-backend triton (compressed_tensors.py :924-947); 0.5.8 "
			     "and 0.5.9 run compressed-tensors W4A16 with Marlin on CUDA "
			     "(compressed_tensors_moe.py :116-118, compressed_tensors.py :683-685) "
			     "and read no config file for it",
		.env_note = "SGLang then reads every fused-MoE config from there only, not its "
			    "own shipped tables",
	},
	{
		.name = "vllm",
		.lookup = { "vllm/model_executor/layers/fused_moe/fused_moe.py", NULL },
		/* get_config_file_name and get_moe_configs (fused_moe.py :1095-1150) */
		.markers = { "get_device_name_as_file_name()",
			     "f\",block_shape={block_shape}\"",
			     ").replace(\" \", \"\")",
			     "envs.VLLM_TUNED_CONFIG_FOLDER" },
		.env = "VLLM_TUNED_CONFIG_FOLDER",
		/* try_get_optimal_moe_config doubles the packed N back (:1438-1440) */
		.n_packed_int4 = 0,
		.int4_note = "vLLM reads it when it runs W4A16 experts on Triton: --moe-backend "
			     "triton; Marlin comes first otherwise (fused_moe/oracle/int_wna16.py "
			     ":126-143)",
		.env_note = "vLLM reads it before its own configs/ (fused_moe.py :1136-1146)",
	},
};
#define NNAMINGS (sizeof(namings) / sizeof(namings[0]))

/* fail - the message, as patch_fail says it for this command; returns @code. */
#define fail(code, ...) patch_fail("sm120 patch configs", code, __VA_ARGS__)

static int usage(FILE *out, int code)
{
	fprintf(out,
		"usage: sm120 patch configs --model DIR --tp N [--framework sglang|vllm]\n"
		"                           [--site-packages DIR | --out DIR] [--triton-version X.Y.Z]\n"
		"                           [--disable-shared-experts-fusion] [--dry-run]\n"
		"Write our SM120 fused-MoE config table for the model at DIR (its config.json)\n"
		"and tensor-parallel size N where SGLang and vLLM look it up, under each SM120\n"
		"device name (RTX PRO 6000 Blackwell Server / Workstation / Max-Q, GeForce\n"
		"RTX 5090, GB10).\n"
		"  --framework       only this one (default: every one installed, or both with --out)\n"
		"  --site-packages   the install to write into (default: the purelib and platlib\n"
		"                    directories of $PYTHON, else python3)\n"
		"  --out DIR         write into DIR instead, to be read with SGLANG_MOE_CONFIG_DIR=DIR\n"
		"                    (DIR/configs/triton_X_Y_Z/) or VLLM_TUNED_CONFIG_FOLDER=DIR\n"
		"  --triton-version  the Triton SGLang runs with, when no installed one is found\n"
		"  --disable-shared-experts-fusion  as passed to SGLang (its E counts no shared expert)\n"
		"  --dry-run         say what would be written, write nothing\n"
		"tables: patches/configs/ ($SM120_PATCHES, else patches/ beside sm120 or above)\n"
		"exit: 0 written or already there, 1 something refused, 2 usage or bad input\n");
	return code;
}

/* ------------------------------------------------------------ JSON input */

static cJSON *read_json(const char *path, char *err, size_t cap)
{
	size_t len;
	char *text = sm_read_small(path, MAX_JSON_BYTES, &len);
	cJSON *j;

	if (!text) {
		patch_say(err, cap, "%s: %s", path, strerror(errno));
		return NULL;
	}
	j = cJSON_ParseWithLength(text, len);
	free(text);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		patch_say(err, cap, "%s: not a JSON object", path);
		return NULL;
	}
	return j;
}

/* whole - @o's member @key as a whole number in [1, 1 << 24] into *@out: 1,
 * 0 when absent, -1 when present but not such a number. */
static int whole(const cJSON *o, const char *key, long *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	double d;

	if (!v || cJSON_IsNull(v))
		return 0;
	d = cJSON_IsNumber(v) ? v->valuedouble : 0;
	if (d < 1 || d > (1 << 24) || d != (double)(long)d)
		return -1;
	*out = (long)d;
	return 1;
}

/* text_of - @o's string member @key, or "" */
static const char *text_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* pair - @o's member @key as [a, b] of whole numbers: 0, or -1. */
static int pair(const cJSON *o, const char *key, long *a, long *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	const cJSON *x, *y;

	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
		return -1;
	x = cJSON_GetArrayItem(v, 0);
	y = cJSON_GetArrayItem(v, 1);
	if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y) || x->valuedouble < 1 ||
	    y->valuedouble < 1 || x->valuedouble > 65536 || y->valuedouble > 65536 ||
	    x->valuedouble != (double)(long)x->valuedouble ||
	    y->valuedouble != (double)(long)y->valuedouble)
		return -1;
	*a = (long)x->valuedouble;
	*b = (long)y->valuedouble;
	return 0;
}

/*
 * default_shared - n_shared_experts when config.json leaves it out: the
 * transformers configuration class's default, which the frameworks read
 * (DeepseekV3Config and Glm4MoeConfig: 1, as engine/model/config.c records;
 * other model types: none).
 */
static long default_shared(const char *model_type)
{
	static const char *const one[] = { "deepseek_v3", "kimi_k2", "glm4_moe" };
	size_t i;

	for (i = 0; i < sizeof(one) / sizeof(one[0]); i++)
		if (strcmp(model_type, one[i]) == 0)
			return 1;
	return 0;
}

/*
 * read_ct_quant - a compressed-tensors quantization_config @q into @m: the
 * scheme of its first config group (the routed experts' Linear layers).
 * 0, or -1 with @err naming what is not supported.
 */
static int read_ct_quant(const cJSON *q, const char *path, struct moe_model *m, char *err,
			 size_t cap)
{
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(q, "config_groups");
	const cJSON *g = cJSON_IsObject(groups) ? groups->child : NULL, *w, *in;
	const char *fmt, *type, *strategy;
	long bits = 0;

	w = g ? cJSON_GetObjectItemCaseSensitive(g, "weights") : NULL;
	if (!cJSON_IsObject(w)) {
		patch_say(err, cap, "%s: quantization_config.config_groups has no group with "
			  "\"weights\"; is this a compressed-tensors checkpoint?", path);
		return -1;
	}
	in = cJSON_GetObjectItemCaseSensitive(g, "input_activations");
	fmt = *text_of(g, "format") ? text_of(g, "format") : text_of(q, "format");
	type = text_of(w, "type");
	strategy = text_of(w, "strategy");
	whole(w, "num_bits", &bits);
	if (strcmp(type, "float") == 0 && bits == 8) {
		/* CompressedTensorsW8A8Fp8MoE (sglang 0.5.9 compressed_tensors_w8a8_fp8_moe.py
		 * :47-60): per channel with per-token activations, per tensor, or block */
		if (strcmp(strategy, "channel") == 0 && cJSON_IsObject(in) &&
		    strcmp(text_of(in, "strategy"), "token") == 0) {
			m->quant = Q_FP8_CHANNEL;
			return 0;
		}
		if (strcmp(strategy, "tensor") == 0 && cJSON_IsObject(in) &&
		    strcmp(text_of(in, "strategy"), "tensor") == 0) {
			m->quant = Q_FP8_TENSOR;
			return 0;
		}
		if (strcmp(strategy, "block") == 0 &&
		    pair(w, "block_structure", &m->block_n, &m->block_k) == 0) {
			m->quant = Q_FP8_BLOCK;
			return 0;
		}
	}
	if (strcmp(fmt, "pack-quantized") == 0 && strcmp(type, "int") == 0 && bits == 4 &&
	    strcmp(strategy, "group") == 0 && whole(w, "group_size", &m->group) == 1 &&
	    !cJSON_IsObject(in)) {
		m->quant = Q_INT4_GROUP;
		return 0;
	}
	patch_say(err, cap, "%s: compressed-tensors weights {type \"%s\", num_bits %ld, strategy "
		  "\"%s\"} in format \"%s\": sm120 patch configs knows FP8 (float, 8 bits) per "
		  "channel with per-token activations, per tensor or per block, and INT4 "
		  "pack-quantized per group", path, type, bits, strategy, fmt);
	return -1;
}

/* read_quant - the scheme of quantization_config @q (NULL: none, bf16) into @m. */
static int read_quant(const cJSON *q, const char *path, struct moe_model *m, char *err,
		      size_t cap)
{
	const char *method = q ? text_of(q, "quant_method") : "";

	if (!q) {
		m->quant = Q_BF16;
		return 0;
	}
	if (strcmp(method, "fp8") == 0) {
		/* Fp8Config: weight_block_size gives block quantization, else per tensor */
		if (!cJSON_GetObjectItemCaseSensitive(q, "weight_block_size") ||
		    cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(q, "weight_block_size"))) {
			m->quant = Q_FP8_TENSOR;
			return 0;
		}
		if (pair(q, "weight_block_size", &m->block_n, &m->block_k) != 0) {
			patch_say(err, cap, "%s: quantization_config.weight_block_size is not "
				  "[n, k] (DeepSeek's and Kimi K2's is [128, 128])", path);
			return -1;
		}
		m->quant = Q_FP8_BLOCK;
		return 0;
	}
	if (strcmp(method, "compressed-tensors") == 0)
		return read_ct_quant(q, path, m, err, cap);
	patch_say(err, cap, "%s: quant_method \"%s\": sm120 patch configs knows fp8 and "
		  "compressed-tensors checkpoints and unquantized ones; for this one the frameworks "
		  "run other kernels or other config files", path, method);
	return -1;
}

/*
 * read_model - @dir/config.json into @m: architectures[0] at the top; the
 * MoE sizes from text_config when there is one (Kimi K2.5), else the top;
 * quantization_config from the top, else text_config.  0, or -1 with @err
 * naming the file and the field.
 */
static int read_model(const char *dir, struct moe_model *m, char *err, size_t cap)
{
	static const struct {
		const char *key;
		size_t off;
	} sizes[] = {
		{ "num_experts_per_tok", offsetof(struct moe_model, top_k) },
		{ "hidden_size", offsetof(struct moe_model, hidden) },
		{ "moe_intermediate_size", offsetof(struct moe_model, inter) },
	};
	char path[PATH_MAX];
	const cJSON *text, *archs, *q, *shared;
	cJSON *root;
	size_t i;
	int rc = -1, have;

	memset(m, 0, sizeof(*m));
	if (patch_pathf(path, "%s/config.json", dir) != 0) {
		patch_say(err, cap, "%s/config.json: path too long", dir);
		return -1;
	}
	root = read_json(path, err, cap);
	if (!root)
		return -1;
	text = cJSON_GetObjectItemCaseSensitive(root, "text_config");
	if (!cJSON_IsObject(text))
		text = root;
	archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
	if (cJSON_IsArray(archs) && cJSON_IsString(cJSON_GetArrayItem(archs, 0)))
		snprintf(m->arch, sizeof(m->arch), "%s", cJSON_GetArrayItem(archs, 0)->valuestring);
	snprintf(m->model_type, sizeof(m->model_type), "%s", text_of(text, "model_type"));
	have = whole(text, "n_routed_experts", &m->routed);
	if (have == 0)
		have = whole(text, "num_experts", &m->routed);
	if (have != 1) {
		patch_say(err, cap, "%s: no n_routed_experts (or num_experts) whole number: not a "
			  "mixture-of-experts model, or not one written for transformers", path);
		goto out;
	}
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (whole(text, sizes[i].key, (long *)((char *)m + sizes[i].off)) != 1) {
			patch_say(err, cap, "%s: %s is missing or not a whole number from 1", path,
				  sizes[i].key);
			goto out;
		}
	shared = cJSON_GetObjectItemCaseSensitive(text, "n_shared_experts");
	m->shared = default_shared(m->model_type);
	if (cJSON_IsNumber(shared) && shared->valuedouble >= 0 && shared->valuedouble <= 64 &&
	    shared->valuedouble == (double)(long)shared->valuedouble) {
		m->shared = (long)shared->valuedouble;
	} else if (shared && !cJSON_IsNull(shared)) {
		patch_say(err, cap, "%s: n_shared_experts is not a whole number from 0 to 64", path);
		goto out;
	}
	q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
	if (!cJSON_IsObject(q))
		q = cJSON_GetObjectItemCaseSensitive(text, "quantization_config");
	rc = read_quant(cJSON_IsObject(q) ? q : NULL, path, m, err, cap);
out:
	cJSON_Delete(root);
	return rc;
}

/* describe - one line about @m, for the output. */
static void describe(const struct moe_model *m, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s, %ld routed experts", m->arch[0] ? m->arch : "(no architectures)",
			 m->routed);

	if (n > 0 && (size_t)n < cap && m->shared)
		n += snprintf(out + n, cap - (size_t)n, " + %ld shared", m->shared);
	if (n > 0 && (size_t)n < cap)
		n += snprintf(out + n, cap - (size_t)n, ", top-%ld, hidden %ld, moe_intermediate_size "
			      "%ld, %s", m->top_k, m->hidden, m->inter, quants[m->quant].what);
	if (n > 0 && (size_t)n < cap && m->quant == Q_FP8_BLOCK)
		n += snprintf(out + n, cap - (size_t)n, " %ldx%ld", m->block_n, m->block_k);
	if (n > 0 && (size_t)n < cap && m->quant == Q_INT4_GROUP)
		snprintf(out + n, cap - (size_t)n, ", group %ld", m->group);
}

/* ------------------------------------------------------------ the tables */

static enum quant quant_by_key(const char *key)
{
	int q;

	for (q = 0; q < NQUANTS; q++)
		if (strcmp(quants[q].key, key) == 0)
			return (enum quant)q;
	return NQUANTS;
}

/* table_configs_ok - every member of @configs is "<batch>": {the six whole
 * numbers the kernels take}; 0, or -1 with @why. */
static int table_configs_ok(const cJSON *configs, char *why, size_t cap)
{
	static const char *const keys[] = { "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
					    "GROUP_SIZE_M", "num_warps", "num_stages" };
	const cJSON *c;
	long v;
	size_t i;
	char *end;

	if (!cJSON_IsObject(configs) || !configs->child) {
		patch_say(why, cap, "\"configs\" is not an object of batch size -> configuration");
		return -1;
	}
	cJSON_ArrayForEach(c, configs) {
		errno = 0;
		v = strtol(c->string, &end, 10);
		if (!c->string[0] || *end || errno || v < 1 || !cJSON_IsObject(c)) {
			patch_say(why, cap, "configs \"%s\" is not a batch size (a whole number from 1) "
				  "with a configuration object", c->string);
			return -1;
		}
		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (whole(c, keys[i], &v) != 1 || cJSON_GetArraySize(c) != 6) {
				patch_say(why, cap, "configs \"%s\" must have exactly BLOCK_SIZE_M, "
					  "BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps and "
					  "num_stages, whole numbers", c->string);
				return -1;
			}
	}
	return 0;
}

/*
 * load_table - the table file @path into @t (patches/configs/README.md
 * describes the layout).  0, or -1 with @err naming the file and the field.
 */
static int load_table(const char *path, struct moe_table *t, char *err, size_t cap)
{
	const cJSON *shape, *prov;
	char why[256];

	memset(t, 0, sizeof(*t));
	snprintf(t->path, sizeof(t->path), "%s", path);
	t->root = read_json(path, err, cap);
	if (!t->root)
		return -1;
	shape = cJSON_GetObjectItemCaseSensitive(t->root, "shape");
	prov = cJSON_GetObjectItemCaseSensitive(t->root, "provenance");
	why[0] = '\0';
	if (strcmp(text_of(t->root, "format"), TABLE_FORMAT) != 0)
		patch_say(why, sizeof(why), "\"format\" is not \"" TABLE_FORMAT "\"");
	else if (!cJSON_IsString(prov) || !prov->valuestring[0])
		patch_say(why, sizeof(why), "no \"provenance\" (where and how it was tuned)");
	else if (!cJSON_IsObject(shape) ||
		 (t->quant = quant_by_key(text_of(shape, "quant"))) == NQUANTS)
		patch_say(why, sizeof(why), "\"shape\".\"quant\" is none of bf16, fp8_tensor, "
			  "fp8_channel, fp8_block, int4_group");
	else if (whole(shape, "n_routed_experts", &t->routed) != 1 ||
		 whole(shape, "top_k", &t->top_k) != 1 || whole(shape, "hidden_size", &t->hidden) != 1 ||
		 whole(shape, "intermediate_per_partition", &t->inter) != 1)
		patch_say(why, sizeof(why), "\"shape\" needs n_routed_experts, top_k, hidden_size "
			  "and intermediate_per_partition, whole numbers");
	else if (t->quant == Q_FP8_BLOCK && pair(shape, "block_shape", &t->block_n, &t->block_k))
		patch_say(why, sizeof(why), "\"shape\".\"block_shape\" is not [n, k]");
	else if (t->quant == Q_INT4_GROUP && whole(shape, "group_size", &t->group) != 1)
		patch_say(why, sizeof(why), "\"shape\".\"group_size\" is not a whole number");
	else
		table_configs_ok(cJSON_GetObjectItemCaseSensitive(t->root, "configs"), why,
				 sizeof(why));
	if (why[0]) {
		patch_say(err, cap, "%s: %s; see patches/configs/README.md", path, why);
		cJSON_Delete(t->root);
		t->root = NULL;
		return -1;
	}
	snprintf(t->provenance, sizeof(t->provenance), "%s", prov->valuestring);
	t->configs = cJSON_GetObjectItemCaseSensitive(t->root, "configs");
	return 0;
}

static int by_string(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * load_tables - every *.json of @dir, sorted by name, into @ts (MAX_TABLES).
 * Their number (0 when @dir does not exist), or -1 with @err.
 */
static int load_tables(const char *dir, struct moe_table *ts, char *err, size_t cap)
{
	char *names[MAX_TABLES], path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0, i, rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : (patch_say(err, cap, "%s: %s", dir, strerror(errno)), -1);
	while ((de = readdir(d)) && rc == 0) {
		size_t len = strlen(de->d_name);

		if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0 || de->d_name[0] == '.')
			continue;
		if (n == MAX_TABLES) {
			patch_say(err, cap, "%s: more than %d tables", dir, MAX_TABLES);
			rc = -1;
		} else if (!(names[n] = strdup(de->d_name))) {
			patch_say(err, cap, "out of memory");
			rc = -1;
		} else {
			n++;
		}
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), by_string);
	for (i = 0; i < n; i++) {
		if (rc == 0 && (patch_pathf(path, "%s/%s", dir, names[i]) != 0 ||
				load_table(path, &ts[i], err, cap) != 0)) {
			if (!err[0])
				patch_say(err, cap, "%s/%s: path too long", dir, names[i]);
			rc = -1;
			while (i-- > 0)
				cJSON_Delete(ts[i].root);
			i = n;
			break;
		}
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	return rc ? -1 : n;
}

/* table_fits - does @t hold the layer of @m at a per-partition intermediate size @inter? */
static int table_fits(const struct moe_table *t, const struct moe_model *m, long inter)
{
	return t->quant == m->quant && t->routed == m->routed && t->top_k == m->top_k &&
	       t->hidden == m->hidden && t->inter == inter &&
	       (m->quant != Q_FP8_BLOCK || (t->block_n == m->block_n && t->block_k == m->block_k)) &&
	       (m->quant != Q_INT4_GROUP || t->group == m->group);
}

/* ------------------------------------------------------- the frameworks' names */

/*
 * sglang_fused_shared - the shared experts SGLang fuses into the routed MoE
 * as extra expert slots (each token's top-k grown by as many) for @m on
 * CUDA under tensor parallelism:
 *   Glm4MoeForCausalLM: n_shared_experts (glm4_moe.py
 *     determine_num_fused_shared_experts, 0.5.8 :1033-1057, 0.5.9
 *     :1035-1059; 0.5.23 num_fusable_shared_experts :1033-1035 behind
 *     layers/moe/utils.py resolve_shared_experts_config :601-622);
 *   DeepseekV3ForCausalLM with 256 routed and 1 shared (DeepSeek-V3/R1): 1
 *     (deepseek_v2.py 0.5.8 :2833-2873, 0.5.9 :2853-2895, 0.5.23
 *     :3358-3366); Kimi K2's 384 experts are not fused;
 *   anything else: 0.
 * --disable-shared-experts-fusion (@no_fusion) makes it 0 everywhere.
 */
static long sglang_fused_shared(const struct moe_model *m, int no_fusion)
{
	if (no_fusion || m->shared == 0)
		return 0;
	if (strcmp(m->arch, "Glm4MoeForCausalLM") == 0)
		return m->shared;
	if (strcmp(m->arch, "DeepseekV3ForCausalLM") == 0 && m->routed == 256 && m->shared == 1)
		return 1;
	return 0;
}

/*
 * layer_e_n - E and N of the file name @nm reads for @m at TP @tp: E is w2's
 * expert count, N its last dimension (try_get_optimal_moe_config: sglang
 * 0.5.9 fused_moe_triton_config.py :223, vllm fused_moe.py :1437-1440), w2
 * being [E, hidden, moe_intermediate_size / tp] (INT4: packed two per byte).
 */
static void layer_e_n(const struct naming *nm, const struct moe_model *m, long tp, int no_fusion,
		      long *e, long *n)
{
	*e = m->routed + (nm->fuses_shared ? sglang_fused_shared(m, no_fusion) : 0);
	*n = m->inter / tp;
	if (m->quant == Q_INT4_GROUP && nm->n_packed_int4)
		*n /= 2;
}

/*
 * device_file_name - @device as @nm writes it in a file name: SGLang
 * replaces each space by '_' (get_config_file_name); vLLM each run of
 * whitespace and '/' (vllm/utils/platform_utils.py :69-74
 * get_device_name_as_file_name: re.sub(r"[\s/]+", "_", name)).
 */
static void device_file_name(const struct naming *nm, const char *device, char *out, size_t cap)
{
	size_t n = 0;
	int in_run = 0;
	const char *p;

	for (p = device; *p && n + 1 < cap; p++) {
		int sep = nm->triton_dir ? *p == ' ' : strchr(" \t\n\r\f\v/", *p) != NULL;

		if (!sep)
			out[n++] = *p;
		else if (nm->triton_dir || !in_run)
			out[n++] = '_';
		in_run = sep;
	}
	out[n] = '\0';
}

/*
 * file_name - the config file @nm looks up for a layer of @m with @e experts
 * and N @n on @device (get_config_file_name: sglang 0.5.9 :19-34, vllm
 * :1095-1106): E=..,N=..,device_name=..[,dtype=..][,block_shape=[n, k]]
 * [,per_channel_quant=True].json; the block shape only for block scales
 * (INT4's [0, group] is left out: not all(block_shape)).
 */
static void file_name(const struct naming *nm, const struct moe_model *m, long e, long n,
		      const char *device, char *out, size_t cap)
{
	char dev[256], block[64] = "";

	device_file_name(nm, device, dev, sizeof(dev));
	if (m->quant == Q_FP8_BLOCK)
		snprintf(block, sizeof(block), ",block_shape=[%ld,%s%ld]", m->block_n,
			 nm->block_spaced ? " " : "", m->block_k);
	snprintf(out, cap, "E=%ld,N=%ld,device_name=%s%s%s%s%s.json", e, n, dev,
		 quants[m->quant].dtype[0] ? ",dtype=" : "", quants[m->quant].dtype, block,
		 nm->per_channel && m->quant == Q_FP8_CHANNEL ? ",per_channel_quant=True" : "");
}

/* ------------------------------------------------------------ writing */

/*
 * table_text - the file the frameworks read: the table's configurations by
 * batch size, ascending, each with its six values in the frameworks' order.
 * A malloc'd string ending in a newline, or NULL when out of memory.
 */
static char *table_text(const struct moe_table *t)
{
	static const char *const keys[] = { "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K",
					    "GROUP_SIZE_M", "num_warps", "num_stages" };
	cJSON *out = cJSON_CreateObject();
	const cJSON *c, *best;
	long last = 0, next, v;
	char *text = NULL;
	size_t i;

	if (!out)
		return NULL;
	for (;;) {
		best = NULL;
		next = 0;
		cJSON_ArrayForEach(c, t->configs) {
			v = strtol(c->string, NULL, 10);
			if (v > last && (!best || v < next)) {
				best = c;
				next = v;
			}
		}
		if (!best)
			break;
		c = cJSON_AddObjectToObject(out, best->string);
		for (i = 0; c && i < sizeof(keys) / sizeof(keys[0]); i++)
			cJSON_AddNumberToObject((cJSON *)c, keys[i],
				cJSON_GetObjectItemCaseSensitive(best, keys[i])->valuedouble);
		if (!c)
			goto out;
		last = next;
	}
	text = cJSON_Print(out);
	if (text) {
		/* a newline at the end, as editors and the frameworks' own files have */
		char *nl = realloc(text, strlen(text) + 2);

		if (nl)
			strcat(nl, "\n");
		text = nl ? nl : text;
	}
out:
	cJSON_Delete(out);
	return text;
}

/* mkdirs - @path and its missing parents (mode 0755): 0, or -errno. */
static int mkdirs(const char *path)
{
	char p[PATH_MAX];
	struct stat st;
	size_t i, len = strlen(path);

	if (len >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, path, len + 1);
	for (i = 1; i <= len; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		p[i] = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			return -errno;
		if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
			return -ENOTDIR;
		p[i] = path[i];
	}
	return 0;
}

/* What writing one file came to. */
enum outcome { WROTE, SAME, WOULD, IN_THE_WAY, CANNOT };

/*
 * put_file - @text into @dir/@name unless a file is there: the same bytes
 * are SAME, other bytes IN_THE_WAY (kept); written through a temporary file
 * and a rename (WROTE), or not with @dry_run (WOULD).  CANNOT with @why.
 */
static enum outcome put_file(const char *dir, const char *name, const char *text, int dry_run,
			     char *why, size_t cap)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	size_t len = strlen(text), have, off = 0;
	char *old;
	int fd, e = 0;

	if (patch_pathf(path, "%s/%s", dir, name) != 0 || patch_pathf(tmp, "%s.sm120-new.XXXXXX", path)) {
		patch_say(why, cap, "path too long");
		return CANNOT;
	}
	old = sm_read_small(path, MAX_JSON_BYTES, &have);
	if (!old && errno != ENOENT && errno != EFBIG) {
		patch_say(why, cap, "cannot read %s (%s)", path, strerror(errno));
		return CANNOT;
	}
	if (old || errno == EFBIG) {
		enum outcome o = old && have == len && memcmp(old, text, len) == 0 ? SAME : IN_THE_WAY;

		free(old);
		return o;
	}
	if (dry_run)
		return WOULD;
	if ((e = -mkdirs(dir)) != 0 || (fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		patch_say(why, cap, "cannot write into %s (%s): run as its owner, or pass --out DIR",
			  dir, strerror(e ? e : errno));
		return CANNOT;
	}
	while (!e && off < len) {
		ssize_t w = write(fd, text + off, len - off);

		if (w < 0 && errno != EINTR)
			e = errno;
		off += w > 0 ? (size_t)w : 0;
	}
	if (!e && (fchmod(fd, 0644) != 0 || fsync(fd) != 0))
		e = errno;
	if (close(fd) != 0 && !e)
		e = errno;
	if (!e && rename(tmp, path) != 0)
		e = errno;
	if (e) {
		unlink(tmp);
		patch_say(why, cap, "cannot write %s (%s)", path, strerror(e));
		return CANNOT;
	}
	return WROTE;
}

/* --------------------------------------------------------- one framework */

/* Where one framework will read the files. */
struct place {
	const struct naming *nm;
	char dir[PATH_MAX];  /* the directory the files go to */
	char what[PATH_MAX + 160]; /* "sglang 0.5.9 in SITE", "sglang (--out)" */
	int from_env;       /* read through nm->env */
};

/* has_markers - does the lookup module at @path hold every marker of @nm? */
static int has_markers(const struct naming *nm, const char *path)
{
	size_t len, i;
	char *text = sm_read_small(path, MAX_JSON_BYTES, &len);
	int ok = text != NULL;

	for (i = 0; ok && i < sizeof(nm->markers) / sizeof(nm->markers[0]) && nm->markers[i]; i++)
		ok = strstr(text, nm->markers[i]) != NULL;
	free(text);
	return ok;
}

/*
 * install_place - @nm's configs directory in the install @in (@triton: the
 * Triton version, SGLang's subdirectory) into @pl.  0, or 1 with @err when
 * the install's lookup is not one sm120 knows.
 */
static int install_place(const struct naming *nm, const struct patch_install *in,
			 const char *triton, struct place *pl, char *err, size_t cap)
{
	char path[PATH_MAX], *slash;
	size_t i;

	for (i = 0; i < 2 && nm->lookup[i]; i++) {
		struct stat st;

		if (patch_pathf(path, "%s/%s", in->site, nm->lookup[i]) != 0 || stat(path, &st) != 0)
			continue;
		if (!has_markers(nm, path)) {
			patch_say(err, cap, "%s %s: %s does not name its config files as sm120 patch "
				  "configs knows (SGLang 0.5.8-0.5.23, vLLM 0.33): write them with "
				  "--out DIR and compare the name it logs at start-up, or leave it out "
				  "with --framework", nm->name, in->version, path);
			return 1;
		}
		slash = strrchr(path, '/');
		*slash = '\0';
		pl->nm = nm;
		if ((nm->triton_dir ? patch_pathf(pl->dir, "%s/configs/triton_%s", path, triton)
				    : patch_pathf(pl->dir, "%s/configs", path)) != 0) {
			patch_say(err, cap, "%s: path too long", path);
			return 1;
		}
		snprintf(pl->what, sizeof(pl->what), "%s %s in %s", nm->name, in->version, in->site);
		return 0;
	}
	patch_say(err, cap, "%s %s in %s has no fused-MoE config lookup where sm120 patch configs "
		  "looks (%s%s%s): write the files with --out DIR, or leave it out with --framework",
		  nm->name, in->version, in->site,
		  nm->lookup[0], nm->lookup[1] ? ", " : "", nm->lookup[1] ? nm->lookup[1] : "");
	return 1;
}

/* triton_dir_name - "3.6.0" as SGLang's directory suffix "3_6_0" into @out. */
static void triton_dir_name(const char *version, char *out, size_t cap)
{
	size_t i;

	for (i = 0; version[i] && i + 1 < cap; i++)
		out[i] = version[i] == '.' ? '_' : version[i];
	out[i] = '\0';
}

/* write_place - the table @t under every device name for @m into @pl; prints
 * a line per file.  Returns 1 when a file was refused or not written. */
static int write_place(const struct place *pl, const struct moe_model *m, const struct opts *o,
		       const struct moe_table *t, const char *text)
{
	static const char *const said[] = { [WROTE] = "wrote", [SAME] = "already there",
					    [WOULD] = "would write" };
	char name[512], why[PATH_MAX + 128], block[64] = "";
	long e, n;
	size_t d;
	int refused = 0;

	layer_e_n(pl->nm, m, o->tp, o->no_fusion, &e, &n);
	if (m->quant == Q_FP8_BLOCK)
		snprintf(block, sizeof(block), " block_shape=[%ld,%s%ld]", m->block_n,
			 pl->nm->block_spaced ? " " : "", m->block_k);
	printf("%s: E=%ld N=%ld%s%s%s%s -> %s\n", pl->what, e, n,
	       quants[m->quant].dtype[0] ? " dtype=" : "", quants[m->quant].dtype, block,
	       pl->nm->per_channel && m->quant == Q_FP8_CHANNEL ? " per_channel_quant=True" : "",
	       pl->dir);
	if (pl->nm->fuses_shared && sglang_fused_shared(m, o->no_fusion))
		printf("  note: SGLang fuses the %ld shared expert%s into the routed MoE (E=%ld); "
		       "run with --disable-shared-experts-fusion, it looks up E=%ld: then pass that "
		       "flag here too\n", m->shared, m->shared == 1 ? "" : "s", e, m->routed);
	if (m->quant == Q_INT4_GROUP)
		printf("  note: %s\n", pl->nm->int4_note);
	for (d = 0; d < NDEVICES; d++) {
		enum outcome r;

		file_name(pl->nm, m, e, n, sm120_devices[d], name, sizeof(name));
		why[0] = '\0';
		r = put_file(pl->dir, name, text, o->dry_run, why, sizeof(why));
		if (r == IN_THE_WAY)
			printf("  kept: %s: a file of other contents is there (shipped with %s or tuned "
			       "by hand); delete it to use %s\n", name, pl->nm->name, t->path);
		else if (r == CANNOT)
			printf("  refused: %s: %s\n", name, why);
		else
			printf("  %s %s\n", said[r], name);
		refused |= r == IN_THE_WAY || r == CANNOT;
	}
	if (pl->from_env)
		printf("  read with: export %s=%s  (%s)\n", pl->nm->env, o->out, pl->nm->env_note);
	return refused;
}

/* ------------------------------------------------------------ the command */

static const struct naming *naming_by_name(const char *name)
{
	size_t i;

	for (i = 0; i < NNAMINGS; i++)
		if (strcmp(namings[i].name, name) == 0)
			return &namings[i];
	return NULL;
}

/*
 * find_triton - the version of Triton installed beside the framework (@site,
 * else the Python's own directories @sites) into @out, or --triton-version.
 * 0, or 2 with a message.
 */
static int find_triton(const struct opts *o, const char *site, char sites[][PATH_MAX],
		       int nsites, char *out, size_t cap)
{
	struct patch_install in;
	char err[1024];
	int i, found = 0;

	if (o->triton) {
		snprintf(out, cap, "%s", o->triton);
		return 0;
	}
	if (site)
		found = patch_find_install(site, "triton", &in, err, sizeof(err));
	for (i = 0; !found && i < nsites; i++)
		found = patch_find_install(sites[i], "triton", &in, err, sizeof(err));
	if (found == 1) {
		snprintf(out, cap, "%s", in.version);
		return 0;
	}
	return fail(2, "SGLang reads its configs from configs/triton_<version>/ of the Triton it "
		    "runs with, and no installed Triton was found%s%s; pass --triton-version X.Y.Z "
		    "(python3 -c 'import triton; print(triton.__version__)')", found < 0 ? ": " : "",
		    found < 0 ? err : "");
}

/*
 * places - where each framework reads the files: into @pls (NNAMINGS), their
 * number, or -(exit status) with a message.
 */
static int places(const struct opts *o, struct place *pls)
{
	char sites[PATCH_MAX_SITES][PATH_MAX], err[2048], triton[128], tdir[128] = "";
	const char *python = NULL;
	int nsites = 0, n = 0, rc;
	size_t f;

	if (o->out || !o->site) {
		nsites = patch_python_sites(sites, &python, err, sizeof(err));
		if (nsites < 0 && !o->out)
			return -fail(2, "%s", err);
		nsites = nsites < 0 ? 0 : nsites;
	}
	for (f = 0; f < NNAMINGS; f++) {
		const struct naming *nm = &namings[f];
		struct patch_install in;
		struct place *pl = &pls[n];
		int i, found = 0;

		if (o->only && strcmp(o->only, nm->name) != 0)
			continue;
		memset(pl, 0, sizeof(*pl));
		if (o->out) {
			if (nm->triton_dir) {
				if ((rc = find_triton(o, NULL, sites, nsites, triton, sizeof(triton))))
					return -rc;
				triton_dir_name(triton, tdir, sizeof(tdir));
			}
			pl->nm = nm;
			pl->from_env = 1;
			if ((nm->triton_dir ? patch_pathf(pl->dir, "%s/configs/triton_%s", o->out, tdir)
					    : patch_pathf(pl->dir, "%s", o->out)) != 0)
				return -fail(2, "--out %s: path too long", o->out);
			snprintf(pl->what, sizeof(pl->what), "%s (--out)", nm->name);
			n++;
			continue;
		}
		for (i = 0; !found && i < (o->site ? 1 : nsites); i++) {
			memset(&in, 0, sizeof(in));
			found = patch_find_install(o->site ? o->site : sites[i], nm->name, &in, err,
						   sizeof(err));
		}
		if (found < 0)
			return -fail(2, "%s", err);
		if (!found)
			continue;
		if (nm->triton_dir) {
			if ((rc = find_triton(o, in.site, sites, nsites, triton, sizeof(triton))))
				return -rc;
			triton_dir_name(triton, tdir, sizeof(tdir));
		}
		if (install_place(nm, &in, tdir, pl, err, sizeof(err)) != 0)
			return -fail(1, "%s", err);
		n++;
	}
	if (n == 0)
		return -fail(2, "no %s installed in %s; pass --site-packages DIR (the directory that "
			     "holds it), or --out DIR to write the files elsewhere", o->only ? o->only :
			     "SGLang or vLLM", o->site ? o->site : python ? python : "python3's "
			     "site-packages");
	return n;
}

/* parse - the options after "configs" into @o: 0; -1 when --help was
 * printed (exit 0); else the exit status of a usage error, said. */
static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "tp", required_argument, NULL, 't' },
		{ "framework", required_argument, NULL, 'f' },
		{ "site-packages", required_argument, NULL, 's' },
		{ "out", required_argument, NULL, 'o' },
		{ "triton-version", required_argument, NULL, 'v' },
		{ "disable-shared-experts-fusion", no_argument, NULL, 'D' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct stat st;
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': o->model = optarg; break;
		case 'f': o->only = optarg; break;
		case 's': o->site = optarg; break;
		case 'o': o->out = optarg; break;
		case 'v': o->triton = optarg; break;
		case 'D': o->no_fusion = 1; break;
		case 'n': o->dry_run = 1; break;
		case 'h':
			usage(stdout, 0);
			return -1;
		case 't':
			errno = 0;
			o->tp = strtol(optarg, &end, 10);
			if (*end || errno || o->tp < 1 || o->tp > 1024)
				return fail(2, "--tp %s: give the tensor-parallel size, a whole number "
					    "from 1 (the frameworks' --tp / --tensor-parallel-size)", optarg);
			break;
		default:
			return fail(2, "%s '%s'; 'sm120 patch configs --help' shows the usage",
				    c == ':' ? "a value is missing after" : "unknown option",
				    argv[optind - 1]);
		}
	}
	if (optind != argc)
		return fail(2, "unexpected argument '%s'; 'sm120 patch configs --help' shows the usage",
			    argv[optind]);
	if (!o->model || !o->tp)
		return fail(2, "--model DIR and --tp N are required; 'sm120 patch configs --help' "
			    "shows the usage");
	if (o->only && !naming_by_name(o->only))
		return fail(2, "--framework %s: sm120 patch configs knows sglang and vllm", o->only);
	if (o->site && o->out)
		return fail(2, "--site-packages and --out: give one, the install to write into or "
			    "the directory to write instead");
	if (o->site && (stat(o->site, &st) != 0 || !S_ISDIR(st.st_mode)))
		return fail(2, "--site-packages %s: not a directory; pass the site-packages directory "
			    "the framework is installed in", o->site);
	if (o->triton && (strspn(o->triton, "0123456789.") != strlen(o->triton) || !*o->triton))
		return fail(2, "--triton-version %s: give a version such as 3.6.0", o->triton);
	return 0;
}

/* patch_configs - `sm120 patch configs` (argv[0] is "configs"): see the top of the file. */
int patch_configs(int argc, char **argv)
{
	static struct moe_table tables[MAX_TABLES];
	struct place pls[NNAMINGS];
	char err[2048], root[PATH_MAX], dir[PATH_MAX], line[512];
	const struct moe_table *t = NULL;
	struct moe_model m;
	struct opts o;
	char *text;
	int rc, nt, np, i;

	if ((rc = parse(argc, argv, &o)) != 0)
		return rc < 0 ? 0 : rc;
	err[0] = '\0';
	if (read_model(o.model, &m, err, sizeof(err)) != 0)
		return fail(2, "%s", err);
	describe(&m, line, sizeof(line));
	printf("model %s: %s\n", o.model, line);
	if (m.inter % o.tp != 0)
		return fail(1, "moe_intermediate_size %ld is not divisible by --tp %ld: neither "
			    "framework shards such a layer", m.inter, o.tp);
	if (patch_patches_dir(root, err, sizeof(err)) != 0 ||
	    patch_pathf(dir, "%s/configs", root) != 0)
		return fail(2, "%s", err[0] ? err : "patches/configs: path too long");
	if ((nt = load_tables(dir, tables, err, sizeof(err))) < 0)
		return fail(2, "%s", err);
	for (i = 0; i < nt && !t; i++)
		if (table_fits(&tables[i], &m, m.inter / o.tp))
			t = &tables[i];
	if (!t) {
		rc = fail(1, "no table in %s for this layer at --tp %ld (intermediate %ld per "
			  "partition, %s): tune one on a GPU with 'python3 tests/gpu/tune_moe.py "
			  "--model %s --tp %ld --out DIR' (patches/configs/README.md), then put "
			  "DIR/*.json in %s", dir, o.tp, m.inter / o.tp, quants[m.quant].what, o.model,
			  o.tp, dir);
		goto out;
	}
	printf("table %s: %s\n", t->path, t->provenance);
	if ((np = places(&o, pls)) < 0) {
		rc = -np;
		goto out;
	}
	if (!(text = table_text(t))) {
		rc = fail(2, "out of memory");
		goto out;
	}
	for (i = 0; i < np; i++)
		rc |= write_place(&pls[i], &m, &o, t, text);
	free(text);
	if (rc)
		printf("configs: some files were not written; resolve each one and retry\n");
	else
		printf("configs: %s\n", o.dry_run ? "nothing written (--dry-run)" : "done");
out:
	for (i = 0; i < nt; i++)
		cJSON_Delete(tables[i].root);
	return rc;
}
