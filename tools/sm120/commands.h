/*
 * commands.h - the subcommands of the `sm120` program.
 *
 * Each subcommand is one function taking its own argv (argv[0] is the
 * subcommand name) and returning the process exit status.  main.c holds the
 * one table that maps names to these functions.
 */
#ifndef SM120_TOOLS_COMMANDS_H
#define SM120_TOOLS_COMMANDS_H

#include "../../core/limits/target.h"

/* cmd_scan - `sm120 scan`: exit 0 all fit, 1 some do not, 2 on error. */
int cmd_scan(int argc, char **argv);

/*
 * cmd_configs - `sm120 configs`: each bucket of fused-MoE config files fits,
 * is rerouted or is refused; exit 0 nothing refused, 1 something is, 2 bad input.
 */
int cmd_configs(int argc, char **argv);

/* cmd_report - `sm120 report`: exit 0 nothing over a limit, 1 something is, 2 bad input. */
int cmd_report(int argc, char **argv);

/* cmd_run - `sm120 run`: execs the command (its status); 2 usage, 127 cannot run it. */
int cmd_run(int argc, char **argv);

/* cmd_doctor - `sm120 doctor`: exit 0 driver, device and shim usable, 1 otherwise. */
int cmd_doctor(int argc, char **argv);

/* cmd_rules - `sm120 rules check|compile`: exit 0 valid, 1 errors, 2 usage. */
int cmd_rules(int argc, char **argv);

/* cmd_route - `sm120 route`: exit 0 replayed decisions equal the logged ones, 1 not, 2 bad input. */
int cmd_route(int argc, char **argv);

/* cmd_ref - `sm120 ref make-model|run|info`: exit 0 done, 1 failed, 2 usage. */
int cmd_ref(int argc, char **argv);

/*
 * cmd_patch - `sm120 patch check|apply|revert`: patches/<framework>/<release
 * line>/ on the installed SGLang / vLLM; `sm120 patch configs`: the
 * fused-MoE config tables of patches/configs/ (cmd_patch_configs.c): exit 0
 * done or nothing to do, 1 something refused (unknown version, unrecognised
 * file, no table), 2 usage or bad input.
 */
int cmd_patch(int argc, char **argv);

/*
 * tool_find_shim - the shim's absolute path in @out (PATH_MAX bytes):
 * $SM120SHIM_LIB, else libsm120shim.so in the directory of the running sm120
 * program.  Returns 0, or -errno with @err saying where it looked and how to
 * fix it.
 */
int tool_find_shim(char *out, struct sm_err *err);

/*
 * tool_driver - libcuda.so.1, opened at run time and initialised (cuInit),
 * or NULL with @err saying what is missing and what to do instead.
 */
void *tool_driver(struct sm_err *err);

/*
 * tool_target - resolve a --target value: a profile name or byte count, or
 * "auto" for device 0 through the driver (libcuda.so.1, loaded at run time).
 * Returns 0, or -errno with @err saying what to pass instead.
 */
int tool_target(const char *spec, struct target_limits *out, struct sm_err *err);

/* tool_plural - @one when @n is 1, else @many: "1 error", "2 errors" (cmd_report.c). */
const char *tool_plural(unsigned long n, const char *one, const char *many);

#endif
