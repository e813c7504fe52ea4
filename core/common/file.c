/* file.c - whole small files (see file.h). */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

char *sm_read_small(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), e = 0;
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	ssize_t got = 1;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0)
		e = errno;
	else if (!S_ISREG(st.st_mode))
		e = EINVAL;
	else if ((uint64_t)st.st_size > max)
		e = EFBIG;
	else if (!(buf = malloc((size_t)st.st_size + 1)))
		e = ENOMEM;
	/* Up to the size fstat gave, and one byte more: a file that grew is refused. */
	while (!e && got > 0 && n <= (size_t)st.st_size) {
		got = read(fd, buf + n, (size_t)st.st_size + 1 - n);
		if (got < 0 && errno != EINTR)
			e = errno;
		n += got > 0 ? (size_t)got : 0;
	}
	if (!e && n > (size_t)st.st_size)
		e = EFBIG;
	close(fd);
	if (e) {
		free(buf);
		errno = e;
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}
