/* Files a process keeps about itself in a subdirectory of the runtime directory
 * (stats/, socks/), mapped shared so that the usmc tool reads them live.
 *
 * The process holds a shared flock on its file from creation until it exits: the
 * descriptor closes at exit and at exec (an exec'd program makes its own file),
 * and a forked child holding the inherited descriptor keeps it locked. So the
 * tool tells a live process's file from a dead one's without trusting process
 * ids, which are reused. A file's header is published last: a file whose magic
 * is not there yet is skipped, never judged. */
#ifndef USMC_PROCFILE_H
#define USMC_PROCFILE_H

#include <stddef.h>
#include <sys/types.h>

/* Library: creates <rundir>/<sub>/<pid>-<random> of size bytes (zero filled),
 * locked and mapped read-write. Returns the mapping and the lock's descriptor in
 * *lock_fd, or NULL (and -1) when the runtime directory cannot be used. */
void *procfile_create(const char *sub, size_t size, int *lock_fd);

/* Tool: one file of another process, opened and mapped for the caller. */
struct procfile {
	const char *path;
	const void *map;      /* read-only unless procfile_each was asked for writing */
	size_t size;
	int alive;            /* its process (or a fork child of it) still holds the lock */
};

/* Calls fn for every regular file in <rundir>/<sub> that the caller owns and
 * that holds at least min bytes, mapped (read-write when writable). fn returning
 * nonzero stops the walk. Files are another process's work: fn validates.
 * Returns how many files were left out because another user owns them (root
 * looking at a user's runtime directory, say), for the caller to say so. */
int procfile_each(const char *sub, size_t min, int writable,
		   int (*fn)(struct procfile *f, void *arg), void *arg);

#endif
