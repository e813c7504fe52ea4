/*
 * rulesc.c - `sm120 rules` on its own, for the build: it compiles the rule files
 * into the C table that the shim and the sm120 tool are linked with (the tool
 * needs the table itself for `sm120 route`, so it cannot compile it).
 * Usage as `sm120 rules`: rulesc check FILE... | rulesc compile -o OUT.c FILE...
 */
#include "../sm120/commands.h"

int main(int argc, char **argv)
{
	return cmd_rules(argc, argv);
}
