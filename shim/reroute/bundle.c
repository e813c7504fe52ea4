/* bundle.c - access to the embedded fatbin (see bundle.h). */
#include "bundle.h"

extern const char sm120_bundle_start[];
extern const char sm120_bundle_end[];

const void *bundle_fatbin(size_t *len)
{
	*len = (size_t)(sm120_bundle_end - sm120_bundle_start);
	return sm120_bundle_start;
}
