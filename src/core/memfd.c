#include "memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

int memfd_sealed(const char *name, uint64_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), e;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0 || real.fcntl(fd, F_ADD_SEALS, SEALS) < 0) {
		e = -errno;
		real.close(fd);
		return e;
	}
	return fd;
}

void *memfd_map(int fd, uint64_t size)
{
	struct stat st;
	int seals = real.fcntl(fd, F_GET_SEALS);

	if (seals < 0 || (seals & SEALS) != SEALS || fstat(fd, &st) < 0 ||
	    (uint64_t)st.st_size < size) {
		errno = EINVAL;
		return NULL;
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}
