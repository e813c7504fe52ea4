/* ctor_main.c - links ctor_lib.so, whose constructor does the work. */
int ctor_lib_linked(void);

int main(void)
{
	return ctor_lib_linked() ? 0 : 1;
}
