/* SA_RESTART for waits usmc performs itself.
 *
 * A blocking recv() on TCP interrupted by a signal is restarted by the kernel when
 * the handler was installed with SA_RESTART, and fails with EINTR otherwise. Our
 * waits sleep in poll(), which is never restarted, so we must know which handler
 * ran: every handler the application installs is wrapped by one that records its
 * SA_RESTART flag for the interrupted thread. The application still sees its own
 * handler and flags through sigaction(). The wrapper also marks where the handler runs,
 * so that the library keeps to async-signal-safe work inside it (sys_in_signal()). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "../core/hooks.h"
#include "../core/sys.h"

static struct sigaction app[NSIG];
static __thread int last_restart __attribute__((tls_model("initial-exec"))) = -1;
/* What wakes this thread's wait when a handler ran: between the last look at
 * last_restart and the sleep, a handler would otherwise go unseen. */
static __thread void (*wake_fn)(void *) __attribute__((tls_model("initial-exec")));
static __thread void *wake_arg __attribute__((tls_model("initial-exec")));

static void wrapper(int sig, siginfo_t *info, void *uc)
{
	struct sigaction *a = &app[sig];
	int restart = (a->sa_flags & SA_RESTART) != 0;
	uintptr_t mark = sys_signal_enter((uintptr_t)__builtin_frame_address(0));

	if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, info, uc);
	else if (a->sa_handler != SIG_IGN && a->sa_handler != SIG_DFL)
		a->sa_handler(sig);
	sys_signal_leave(mark);
	if (a->sa_flags & SA_RESETHAND)
		a->sa_handler = SIG_DFL;
	last_restart = restart;
	if (wake_fn)
		wake_fn(wake_arg);
}

void signal_wait_begin(void)
{
	last_restart = -1;
}

int signal_wait_restart(void)
{
	return last_restart == 1;
}

int signal_caught(void)
{
	return last_restart != -1;
}

int signal_sleep_begin(void (*wake)(void *), void *arg)
{
	wake_arg = arg;
	atomic_signal_fence(memory_order_seq_cst);
	wake_fn = wake;
	atomic_signal_fence(memory_order_seq_cst);
	return signal_caught();
}

void signal_sleep_end(void)
{
	wake_fn = NULL;
	atomic_signal_fence(memory_order_seq_cst);
}

int signal_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (signal_caught()) {
		errno = EINTR;
		r = -1;
	} else {
		r = real.ppoll(fds, n, ts, mask ? mask : &old);
	}
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return r;
}

static int wrappable(int sig, const struct sigaction *act)
{
	if (sig <= 0 || sig >= NSIG || !act)
		return 0;
	if (act->sa_flags & SA_SIGINFO)
		return act->sa_sigaction != NULL;
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction mine, prev;
	int r;

	if (sig <= 0 || sig >= NSIG)
		return real.sigaction(sig, act, old);
	if (wrappable(sig, act)) {
		mine = *act;
		mine.sa_flags = act->sa_flags | SA_SIGINFO;
		mine.sa_sigaction = wrapper;
		struct sigaction saved = app[sig];
		app[sig] = *act;
		r = real.sigaction(sig, &mine, &prev);
		if (r < 0) {
			app[sig] = saved;
			return r;
		}
		if (old)
			*old = prev.sa_sigaction == wrapper && (prev.sa_flags & SA_SIGINFO) ? saved : prev;
		return r;
	}
	r = real.sigaction(sig, act, &prev);
	if (r == 0 && old)
		*old = prev.sa_sigaction == wrapper && (prev.sa_flags & SA_SIGINFO) ? app[sig] : prev;
	return r;
}

/* glibc's signal() calls its internal sigaction directly, so it is caught here
 * too, with its BSD semantics: SA_RESTART. */
sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = SA_RESTART;
	sigemptyset(&act.sa_mask);
	if (sig > 0 && sig < NSIG)
		sigaddset(&act.sa_mask, sig);
	if (sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return signal(sig, handler);
}

sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = SA_RESETHAND | SA_NODEFER;
	sigemptyset(&act.sa_mask);
	if (sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}
