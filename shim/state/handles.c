/* handles.c - see handles.h. */
#include "handles.h"

#include <stdlib.h>
#include <string.h>

#include "forklock.h"

#define SLOTS_LOG2 16
#define SLOTS (1u << SLOTS_LOG2)
#define MAX_FILL (SLOTS / 4 * 3)

static _Atomic(struct kernel_rec *) slots[SLOTS];
static unsigned int filled;
/* Replaced records: never freed, a lock-free reader may still be reading one. */
static struct kernel_rec *retired;
FORK_SAFE_MUTEX(put)

static unsigned int slot_of(const void *handle)
{
	return (unsigned int)(((uintptr_t)handle * 0x9e3779b97f4a7c15ull) >> (64 - SLOTS_LOG2));
}

struct kernel_rec *handles_get(const void *handle)
{
	unsigned int i = slot_of(handle), n;

	for (n = 0; n < SLOTS; n++, i = (i + 1) & (SLOTS - 1)) {
		struct kernel_rec *r = atomic_load_explicit(&slots[i], memory_order_acquire);

		if (!r)
			return NULL;
		if (atomic_load_explicit(&r->handle, memory_order_acquire) == handle)
			return r;
	}
	return NULL;
}

struct kernel_rec *handles_put(void *handle, void *owner, int is_kernel, const char *name,
			       uint32_t static_smem)
{
	struct kernel_rec *r = calloc(1, sizeof(*r)), *old;
	unsigned int i = slot_of(handle), n, free_slot = SLOTS;

	if (!r || !handle || handle == HANDLES_DEAD) {
		free(r);
		return NULL;
	}
	r->owner = owner;
	r->is_kernel = is_kernel;
	r->static_smem = static_smem;
	strncpy(r->name, name ? name : "?", sizeof(r->name) - 1);
	atomic_store(&r->handle, handle);
	put_lock();
	for (n = 0; n < SLOTS; n++, i = (i + 1) & (SLOTS - 1)) {
		old = atomic_load(&slots[i]);
		if (!old || atomic_load(&old->handle) == HANDLES_DEAD) {
			if (free_slot == SLOTS)
				free_slot = i;
			if (!old)
				break;
			continue;
		}
		if (atomic_load(&old->handle) == handle) {
			/* Same handle again: the old record dies, the new one replaces it. */
			atomic_store_explicit(&slots[i], r, memory_order_release);
			atomic_store(&old->handle, HANDLES_DEAD);
			old->retired = retired;
			retired = old;
			put_unlock();
			return r;
		}
	}
	if (free_slot == SLOTS || (!atomic_load(&slots[free_slot]) && filled >= MAX_FILL)) {
		put_unlock();
		free(r);
		return NULL;
	}
	old = atomic_load(&slots[free_slot]);
	if (!old) {
		filled++;
	} else {
		old->retired = retired;
		retired = old;
	}
	atomic_store_explicit(&slots[free_slot], r, memory_order_release);
	put_unlock();
	return r;
}

void handles_drop_owner(const void *owner)
{
	unsigned int i;

	if (!owner)
		return;
	put_lock();
	for (i = 0; filled && i < SLOTS; i++) {
		struct kernel_rec *r = atomic_load(&slots[i]);

		if (r && r->owner == owner)
			atomic_store(&r->handle, HANDLES_DEAD);
	}
	put_unlock();
}
