/*
 * bundle.h - the bundled SM120 kernels, embedded in libsm120shim.so.
 *
 * `make` compiles every .cu under kernels/ for sm_90 and sm_120, packs the cubins
 * into one fatbin and assembles it into the .nv_fatbin section of the shim
 * (bundle.S), so no file has to be found at run time and `sm120 scan` on the
 * shim itself lists exactly the kernels that ship.
 */
#ifndef SM120_SHIM_REROUTE_BUNDLE_H
#define SM120_SHIM_REROUTE_BUNDLE_H

#include <stddef.h>

/* bundle_fatbin - the embedded fatbin container and its size in bytes. */
const void *bundle_fatbin(size_t *len);

#endif
