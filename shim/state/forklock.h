/*
 * forklock.h - a mutex that a forked child can always take.
 *
 * A thread of the parent may hold the lock when another thread forks; the
 * child then has the lock held by a thread that does not exist there.
 * FORK_SAFE_MUTEX(name) defines a static mutex and name_lock() /
 * name_unlock(); the first name_lock() registers pthread_atfork handlers that
 * take the lock around fork() and release it in both processes.
 */
#ifndef SM120_SHIM_STATE_FORKLOCK_H
#define SM120_SHIM_STATE_FORKLOCK_H

#include <pthread.h>

#define FORK_SAFE_MUTEX(name)                                                              \
	static pthread_mutex_t name##_mutex = PTHREAD_MUTEX_INITIALIZER;                   \
	static pthread_once_t name##_once = PTHREAD_ONCE_INIT;                             \
	static void name##_before_fork(void) { pthread_mutex_lock(&name##_mutex); }        \
	static void name##_after_fork(void) { pthread_mutex_unlock(&name##_mutex); }       \
	static void name##_register(void)                                                  \
	{                                                                                  \
		pthread_atfork(name##_before_fork, name##_after_fork, name##_after_fork);  \
	}                                                                                  \
	static inline void name##_lock(void)                                               \
	{                                                                                  \
		pthread_once(&name##_once, name##_register);                               \
		pthread_mutex_lock(&name##_mutex);                                         \
	}                                                                                  \
	static inline void name##_unlock(void) { pthread_mutex_unlock(&name##_mutex); }

#endif
