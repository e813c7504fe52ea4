/*
 * main.c - the `sm120` program: one command, one table of subcommands.
 *
 *   sm120 scan [--target T] [--json] [--arch SM] [--fails] PATH...
 *   sm120 configs [--target T] [--arch SM] [--json] PATH...
 *   sm120 report [--json] LOG...
 *   sm120 run [--mode M] [--target T] [--log PATH] [--advertise A] [--trace] -- CMD...
 *   sm120 doctor [--target T]
 *   sm120 rules check FILE... | sm120 rules compile -o OUT.c FILE...
 *   sm120 ref make-model|run|info ...
 *   sm120 patch check|apply|revert [--framework F] [--site-packages DIR]
 *   sm120 patch configs --model DIR --tp N [--framework F] [--site-packages DIR | --out DIR]
 *   sm120 version | sm120 --version
 *
 * Each subcommand lives in its own file (cmd_<name>.c) and is listed once in
 * the table below; `sm120 help` prints the table.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"

/*
 * The tool's version.  Written here by hand: the build passes no version
 * (a -DSM120_VERSION="$(git describe --always --dirty)" would take its place).
 */
#ifndef SM120_VERSION
#define SM120_VERSION "0.1.0"
#endif

/* cmd_version - `sm120 version`: "sm120 <version>" on stdout; 2 with arguments. */
static int cmd_version(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: sm120 version (or sm120 --version)\n");
		return 2;
	}
	printf("sm120 %s\n", SM120_VERSION);
	return 0;
}

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "scan", cmd_scan, "list the kernels of cubins, fatbins, libraries or Triton caches "
			    "and whether their shared memory fits a target" },
	{ "configs", cmd_configs, "judge SGLang's and vLLM's tuned fused-MoE config files "
				  "against a target, bucket by bucket" },
	{ "report", cmd_report, "summarise shim logs: one row per kernel, worst first" },
	{ "run", cmd_run, "run a command with the shim preloaded" },
	{ "doctor", cmd_doctor, "check the driver, the devices, the shim and the settings it will use" },
	{ "route", cmd_route, "replay logged launches through the shim's decision" },
	{ "rules", cmd_rules, "check reroute rules, or compile them into the shim's table" },
	{ "ref", cmd_ref, "the reference engine: write synthetic checkpoints, run Kimi K2 / GLM-4.x" },
	{ "patch", cmd_patch, "check, apply or revert our SM120 source patches for the installed "
			      "SGLang / vLLM, or write our SM120 fused-MoE configs (patch configs)" },
	{ "version", cmd_version, "print the version of sm120 (also sm120 --version)" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: sm120 COMMAND [ARGS...]\n\ncommands:\n");
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'sm120 COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(argc - 1, argv + 1);
	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "sm120: unknown command '%s'; 'sm120 help' lists the commands\n", argv[1]);
	return 2;
}
