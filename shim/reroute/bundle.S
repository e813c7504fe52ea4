/*
 * bundle.S - embeds the bundled-kernel fatbin (path in BUNDLE_FATBIN, set by
 * the Makefile) into the .nv_fatbin section; see bundle.h.
 */
	.section .nv_fatbin, "a"
	.balign 16
	.globl sm120_bundle_start
	.hidden sm120_bundle_start
sm120_bundle_start:
	.incbin BUNDLE_FATBIN
	.globl sm120_bundle_end
	.hidden sm120_bundle_end
sm120_bundle_end:
	.section .note.GNU-stack, "", @progbits
