/* next_b.c - the definition dlsym(RTLD_NEXT) from next_a.so must find. */
const char *next_target(void)
{
	return "next_b";
}
