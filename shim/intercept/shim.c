/*
 * shim.c - entry of libsm120shim.so.
 *
 * At this stage the library hooks nothing: preloaded into a process it is a
 * pure pass-through that carries the bundled kernels (bundle.h).  Driver
 * entry points are added to one table under shim/intercept/ as the
 * interception layer lands; everything not in the version script stays
 * hidden, so the libraries linked into the shim never clash with the host
 * process's copies.
 */
#include <stddef.h>

#include "../reroute/bundle.h"

/*
 * shim_bundle_size - bytes of the embedded kernel fatbin.  Internal; keeps the
 * bundle referenced so the linker cannot drop it.
 */
__attribute__((used, visibility("hidden"))) size_t shim_bundle_size(void)
{
	size_t len;

	bundle_fatbin(&len);
	return len;
}
