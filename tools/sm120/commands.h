/*
 * commands.h - the subcommands of the `sm120` program.
 *
 * Each subcommand is one function taking its own argv (argv[0] is the
 * subcommand name) and returning the process exit status.  main.c holds the
 * one table that maps names to these functions.
 */
#ifndef SM120_TOOLS_COMMANDS_H
#define SM120_TOOLS_COMMANDS_H

#include "../../shim/limits/target.h"

/* cmd_scan - `sm120 scan`: exit 0 all fit, 1 some do not, 2 on error. */
int cmd_scan(int argc, char **argv);

/*
 * tool_target - resolve a --target value: a profile name or byte count, or
 * "auto" for device 0 through the driver (libcuda.so.1, loaded at run time).
 * Returns 0, or -errno with @err saying what to pass instead.
 */
int tool_target(const char *spec, struct target_limits *out, struct sm_err *err);

#endif
