/*
 * images.S - embeds the GPU backend's kernel images (fatbins with sm_90 and
 * sm_120 cubins, paths set by the Makefile) into the sm120 tool, in its
 * .nv_fatbin section, so that `sm120 scan build/sm120` lists them: ops.cu,
 * the bundled kernels (kernels/, the same fatbin as the shim's) and the
 * four stand-ins of standin.cu.  gpu.c reads them through <name>_start and
 * <name>_end.
 */
#define IMAGE(name, file)             \
	.balign 16;                   \
	.globl name##_start;          \
	.hidden name##_start;         \
name##_start:                         \
	.incbin file;                 \
	.globl name##_end;            \
	.hidden name##_end;           \
name##_end:

	.section .nv_fatbin, "a"
IMAGE(engine_img_ops, IMG_OPS)
IMAGE(engine_img_bundle, IMG_BUNDLE)
IMAGE(engine_img_standin_moe_bf16, IMG_STANDIN_MOE_BF16)
IMAGE(engine_img_standin_moe_fp8, IMG_STANDIN_MOE_FP8)
IMAGE(engine_img_standin_moe_gptq, IMG_STANDIN_MOE_GPTQ)
IMAGE(engine_img_standin_extend, IMG_STANDIN_EXTEND)
	.section .note.GNU-stack, "", @progbits
