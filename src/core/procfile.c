#include "procfile.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "sys.h"

void *procfile_create(const char *sub, size_t size, int *lock_fd)
{
	char path[4200];
	uint32_t rnd = 0;
	void *p = NULL;

	*lock_fd = -1;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
		rnd = (uint32_t)sys_now_ns();
	if (snprintf(path, sizeof(path), "%s/%s", cfg.rundir, sub) >= (int)sizeof(path) ||
	    config_rundir_ready() < 0)
		return NULL;
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%s/%d-%08x", cfg.rundir, sub, (int)getpid(), rnd);
	int fd = real.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return NULL;
	if (flock(fd, LOCK_SH) == 0 && ftruncate(fd, (off_t)size) == 0) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			p = NULL;
	}
	if (!p) {
		unlink(path);
		real.close(fd);
		return NULL;
	}
	*lock_fd = sys_fd_high(fd);
	return p;
}

/* Nobody holds the lock any more: taking it exclusively succeeds. */
static int lock_free(int fd)
{
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return 0;
	flock(fd, LOCK_UN);
	return 1;
}

int procfile_each(const char *sub, size_t min, int writable,
		  int (*fn)(struct procfile *f, void *arg), void *arg)
{
	char dir[4200];
	struct dirent *e;
	int stop = 0, others = 0;

	snprintf(dir, sizeof(dir), "%s/%s", cfg.rundir, sub);
	DIR *d = opendir(dir);
	while (d && !stop && (e = readdir(d))) {
		char path[4500];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			continue;
		int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
		others += ok && st.st_uid != geteuid();
		if (ok && st.st_uid == geteuid() && st.st_size >= (off_t)min &&
		    (uint64_t)st.st_size <= SIZE_MAX) {
			size_t size = (size_t)st.st_size;
			void *m = mmap(NULL, size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED,
				       fd, 0);
			if (m != MAP_FAILED) {
				struct procfile f = {path, m, size, !lock_free(fd)};
				stop = fn(&f, arg);
				munmap(m, size);
			}
		}
		close(fd);
	}
	if (d)
		closedir(d);
	return others;
}
