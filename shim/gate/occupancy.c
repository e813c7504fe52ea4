/* occupancy.c - the occupancy padding at launch; see occupancy.h. */
#include "occupancy.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../../core/limits/occupancy.h"
#include "../log/log.h"
#include "../settings/config.h"
#include "../state/facts.h"
#include "../state/forklock.h"

FORK_SAFE_MUTEX(occ)

/* ------------------------------------------------------------ the device */

#define MAX_DEVICES 64

/* Each device's limits, read once from the real driver (0 unread, 1 read, -1 unreadable). */
static struct occ_sm devices[MAX_DEVICES];
static atomic_int device_state[MAX_DEVICES];

/* read_device - @dev's occ_sm from the real driver's attributes; 0, or -1. */
static int read_device(CUdevice dev, struct occ_sm *out)
{
	shim_fn_cuDeviceGetAttribute *get = shim_real(SHIM_HOOK_cuDeviceGetAttribute);
	int v[OCC_DEVICE_ATTRS];
	size_t i;

	for (i = 0; i < OCC_DEVICE_ATTRS; i++)
		if (!get || get(&v[i], (CUdevice_attribute)occupancy_device_attrs[i], dev) != CUDA_SUCCESS ||
		    v[i] < 0)
			return -1;
	occupancy_from_attrs(v, out);
	return 0;
}

/* device_occ - @dev's limits, or NULL when they cannot be known (said once). */
static const struct occ_sm *device_occ(CUdevice dev)
{
	int expected = 0, ok;

	if (dev < 0 || dev >= MAX_DEVICES)
		return NULL;
	if (atomic_load_explicit(&device_state[dev], memory_order_acquire) == 1)
		return &devices[dev];
	if (!atomic_compare_exchange_strong(&device_state[dev], &expected, 2))
		return NULL; /* unreadable, or another thread is reading it: unpadded */
	ok = read_device(dev, &devices[dev]) == 0;
	atomic_store_explicit(&device_state[dev], ok ? 1 : -1, memory_order_release);
	if (!ok)
		shim_log_warn("SM120SHIM_EMULATE_OCCUPANCY: the limits of device %d could not be "
			      "read from the driver; its launches are not padded", (int)dev);
	return ok ? &devices[dev] : NULL;
}

/* ------------------------------------------------- per-kernel attribute state */

/* What the shim did to one kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES (on one device). */
struct occ_state {
	_Atomic(struct kernel_rec *) rec;  /* the key, published last; NULL: free slot */
	int dev;                           /* the device of a CUkernel; -1 for a CUfunction */
	atomic_int base;                   /* what the process's own calls left */
	atomic_int raised;                 /* what the driver holds (>= base) */
	atomic_int off;                    /* a padded launch failed: not padded again */
	atomic_int logged;                 /* the padding was logged */
};

#define OCC_SLOTS 4096
static struct occ_state states[OCC_SLOTS];

static unsigned int slot_of(const struct kernel_rec *r, int dev)
{
	uint64_t h = ((uint64_t)(uintptr_t)r >> 4) * 0x9e3779b97f4a7c15ull + (uint64_t)(dev + 1);

	return (unsigned int)(h >> 40) % OCC_SLOTS;
}

/* attr_of - @s's attribute values. */
static struct occ_attr attr_of(struct occ_state *s)
{
	return (struct occ_attr){ atomic_load(&s->base), atomic_load(&s->raised) };
}

/* find - the state of (@r, @dev), or NULL.  Lock-free. */
static struct occ_state *find(const struct kernel_rec *r, int dev)
{
	unsigned int i = slot_of(r, dev), n;

	for (n = 0; n < OCC_SLOTS; n++, i = (i + 1) % OCC_SLOTS) {
		struct kernel_rec *k = atomic_load_explicit(&states[i].rec, memory_order_acquire);

		if (!k)
			return NULL;
		if (k == r && states[i].dev == dev)
			return &states[i];
	}
	return NULL;
}

/* insert - a state for (@r, @dev) holding @value (locked); NULL when the table is full. */
static struct occ_state *insert(struct kernel_rec *r, int dev, int value)
{
	unsigned int i = slot_of(r, dev), n;

	for (n = 0; n < OCC_SLOTS; n++, i = (i + 1) % OCC_SLOTS) {
		if (atomic_load(&states[i].rec))
			continue;
		states[i].dev = dev;
		atomic_store(&states[i].base, value);
		atomic_store(&states[i].raised, value);
		atomic_store_explicit(&states[i].rec, r, memory_order_release);
		return &states[i];
	}
	if (shim_log_first("occupancy|full"))
		shim_log_warn("SM120SHIM_EMULATE_OCCUPANCY: more than %d padded kernels; the "
			      "others are not padded", OCC_SLOTS);
	return NULL;
}

/* driver_attr - the driver's @attr of @r's kernel (a CUkernel on @dev); 0, or -1. */
static int driver_attr(const struct kernel_rec *r, void *handle, CUdevice dev, CUfunction_attribute attr,
		       int *value)
{
	shim_fn_cuFuncGetAttribute *fget = shim_real(SHIM_HOOK_cuFuncGetAttribute);
	shim_fn_cuKernelGetAttribute *kget = shim_real(SHIM_HOOK_cuKernelGetAttribute);
	CUresult rc = CUDA_ERROR_NOT_FOUND;

	if (r->is_kernel && kget)
		rc = kget(value, attr, (CUkernel)handle, dev);
	else if (!r->is_kernel && fget)
		rc = fget(value, attr, (CUfunction)handle);
	return rc == CUDA_SUCCESS && *value >= 0 ? 0 : -1;
}

/* driver_set - set @r's kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES to @value in the driver. */
static CUresult driver_set(const struct kernel_rec *r, void *handle, CUdevice dev, int value)
{
	shim_fn_cuFuncSetAttribute *fset = shim_real(SHIM_HOOK_cuFuncSetAttribute);
	shim_fn_cuKernelSetAttribute *kset = shim_real(SHIM_HOOK_cuKernelSetAttribute);

	if (r->is_kernel)
		return kset ? kset(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, value,
				   (CUkernel)handle, dev) : CUDA_ERROR_NOT_FOUND;
	return fset ? fset((CUfunction)handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			   value) : CUDA_ERROR_NOT_FOUND;
}

typedef CUresult capturing_fn(CUstream, CUstreamCaptureStatus *);

/* capturing - is @l's stream being captured into a graph (unknown counts as yes)? */
static int capturing(const struct shim_launch *l)
{
	capturing_fn *is_capturing = shim_call(SHIM_CALL_cuStreamIsCapturing);
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	int per_thread = l->via == SHIM_HOOK_cuLaunchKernel_ptsz ||
			 l->via == SHIM_HOOK_cuLaunchKernelEx_ptsz ||
			 l->via == SHIM_HOOK_cuLaunchCooperativeKernel_ptsz;
	CUstream s = per_thread && !l->stream ? CU_STREAM_PER_THREAD : l->stream;

	return is_capturing && (is_capturing(s, &st) != CUDA_SUCCESS ||
				st != CU_STREAM_CAPTURE_STATUS_NONE);
}

/*
 * allow - @r's state on @dev with the driver allowing @want dynamic bytes, or
 * NULL when the launch of @l (its own @l->smem bytes) is not to be padded:
 * the process did not allow it its own bytes (the driver refuses it as it
 * is), the attribute cannot be read or raised, or the stream is being
 * captured.  Locked.
 */
static struct occ_state *allow(struct kernel_rec *r, const struct shim_launch *l, CUdevice dev,
			       int key, int want)
{
	struct occ_state *s;
	struct occ_attr a;
	int cur;

	occ_lock();
	s = find(r, key);
	if (!s && driver_attr(r, l->f, dev, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &cur) == 0)
		s = insert(r, key, cur);
	if (s) {
		a = attr_of(s);
		if (occupancy_attr_launch(&a, l->smem) != OCC_ATTR_PAD || atomic_load(&s->off))
			s = NULL; /* over what the process allowed, or padding failed before */
	}
	if (s && atomic_load(&s->raised) < want) {
		if (capturing(l)) {
			s = NULL;
		} else if (driver_set(r, l->f, dev, want) == CUDA_SUCCESS) {
			atomic_store(&s->raised, want);
		} else {
			atomic_store(&s->off, 1);
			s = NULL;
		}
	}
	occ_unlock();
	return s;
}

/* ----------------------------------------------------------------- logging */

/* log_event - the "occupancy" JSON event of @action for launch @l of @r. */
static void log_event(struct kernel_rec *r, const struct shim_launch *l, const char *action,
		      const struct occ_pad *p, const char *reason)
{
	const struct shim_config *c = shim_config();
	const struct kernel_rec *k = shim_kernel_facts(r);
	const struct shim_event_pad pad = { l->smem, p->dynamic, p->padded_blocks, p->target_blocks,
					    p->device_blocks };
	struct shim_event e = {
		.event = "occupancy", .level = "info", .action = action, .kernel = r->name,
		.via = shim_hook_table[l->via].name, .target = c->target.name,
		.mode = route_mode_name(c->mode), .origin = k ? k->origin : NULL,
		.static_smem = r->static_smem, .dynamic_smem = l->smem, .limit = -1, .kernels = -1,
		.regs = k ? k->facts.regs : -1, .param_bytes = -1, .reason = reason, .pad = &pad,
	};

	memcpy(e.grid, l->grid, sizeof(e.grid));
	memcpy(e.block, l->block, sizeof(e.block));
	shim_log_event(&e);
}

/* log_first_pad - the one stderr line that says padding is on, at the first padded launch. */
static void log_first_pad(const char *name, const struct shim_launch *l, const struct occ_pad *p)
{
	if (!shim_log_first("occupancy|first"))
		return;
	shim_log_warn("SM120SHIM_EMULATE_OCCUPANCY: launches are padded with dynamic shared "
		      "memory so that this GPU keeps no more blocks per SM than %s (first: kernel "
		      "%s, %u -> %u B, %u blocks per SM instead of %u); each padded kernel is "
		      "logged once as \"occupancy\" in SM120SHIM_LOG", shim_config()->target.name,
		      name, l->smem, p->dynamic, p->padded_blocks, p->device_blocks);
}

/* log_impossible - once per kernel: the device cannot be padded down to the target's count. */
static void log_impossible(struct kernel_rec *r, const struct shim_launch *l,
			   const struct occ_pad *p, const struct occ_sm *d)
{
	char key[320], why[160];

	snprintf(key, sizeof(key), "occupancy|impossible|%s", r->name);
	if (!shim_log_first(key))
		return;
	snprintf(why, sizeof(why), "%llu B per block would be needed; the device allows %u B",
		 (unsigned long long)p->needed, d->smem_per_block);
	shim_log_warn("SM120SHIM_EMULATE_OCCUPANCY: kernel %s keeps %u blocks per SM here, %s "
		      "keeps %u; padding it down would need %llu B per block, more than this GPU "
		      "allows: launched unpadded", r->name, p->device_blocks,
		      shim_config()->target.name, p->target_blocks, (unsigned long long)p->needed);
	log_event(r, l, "impossible", p, why);
}

/* ------------------------------------------------------------------ launches */

/* threads_of - threads per block of @block. */
static uint64_t threads_of(const unsigned int block[3])
{
	return (uint64_t)block[0] * block[1] * block[2];
}

/* pad_on - is padding asked for and meaningful (an emulated target, a mode that is not off)? */
static int pad_on(void)
{
	const struct shim_config *c = shim_config();

	return c->emulate_occupancy && c->mode != SHIM_MODE_OFF && !c->target_auto;
}

/*
 * decide - occupancy_pad for @threads of @regs registers (0: unknown),
 * @static_smem, @dynamic on device @dev against the target into @p; @dev's
 * limits, or NULL when they are unknown.
 */
static const struct occ_sm *decide(CUdevice dev, uint64_t threads, uint32_t regs, uint32_t static_smem,
				   unsigned int dynamic, struct occ_pad *p)
{
	const struct occ_sm *d = device_occ(dev);
	struct occ_sm t;

	if (!d)
		return NULL;
	occupancy_target(&shim_config()->target, d, &t);
	occupancy_pad(&t, d, threads, regs, static_smem, dynamic, p);
	return d;
}

/*
 * regs_of - the registers a thread of @r's kernel @handle (on @dev) takes, as the driver
 * says (the code it runs), else as its loaded image says; 0 when neither does.  Asked once
 * per kernel and device, kept in r->regs_on (a launch on another device asks again).
 */
static uint32_t regs_of(struct kernel_rec *r, void *handle, CUdevice dev)
{
	const uint64_t on = (uint64_t)(uint32_t)(dev + 1) << 32;
	const uint64_t kept = atomic_load_explicit(&r->regs_on, memory_order_relaxed);
	const struct kernel_rec *k;
	int regs;

	if (kept && (kept & ~(uint64_t)UINT32_MAX) == on)
		return (uint32_t)kept - 1;
	if (driver_attr(r, handle, dev, CU_FUNC_ATTRIBUTE_NUM_REGS, &regs) != 0 || regs <= 0) {
		k = shim_kernel_facts(r);
		regs = k && k->facts.regs > 0 ? (int)k->facts.regs : 0;
	}
	atomic_store_explicit(&r->regs_on, on | (uint32_t)(regs + 1), memory_order_relaxed);
	return (uint32_t)regs;
}

/* key_of - the state key of @r on @dev (< 0: the current device). */
static int key_of(const struct kernel_rec *r, CUdevice dev)
{
	return r->is_kernel ? (int)(dev < 0 ? shim_current_device() : dev) : -1;
}

/* pad_launch - shim_occupancy_launch once padding is on. */
static __attribute__((noinline)) int pad_launch(const struct shim_launch *l, unsigned int *smem)
{
	struct kernel_rec *r = shim_kernel(l->f, 0, NULL, NULL);
	const struct occ_sm *d;
	struct occ_state *s;
	struct occ_attr a;
	struct occ_pad p;
	CUdevice dev;
	int key;

	if (!r)
		return 0;
	dev = shim_current_device();
	key = key_of(r, dev);
	s = find(r, key);
	if (s) {
		a = attr_of(s);
		switch (occupancy_attr_launch(&a, l->smem)) {
		case OCC_ATTR_REFUSE:
			return CUDA_ERROR_INVALID_VALUE;
		case OCC_ATTR_PLAIN:
			return 0;
		case OCC_ATTR_PAD:
			break;
		}
		if (atomic_load(&s->off))
			return 0;
	}
	if (!(d = decide(dev, threads_of(l->block), regs_of(r, l->f, dev), r->static_smem, l->smem,
			 &p)))
		return 0;
	if (p.verdict == OCC_IMPOSSIBLE)
		log_impossible(r, l, &p, d);
	if (p.verdict != OCC_PAD)
		return 0;
	if (!s || atomic_load(&s->raised) < (int)p.dynamic)
		s = allow(r, l, dev, key, (int)p.dynamic);
	if (!s)
		return 0;
	*smem = p.dynamic;
	if (atomic_exchange(&s->logged, 1) == 0) {
		log_first_pad(r->name, l, &p);
		log_event(r, l, "pad", &p, NULL);
	}
	return 0;
}

int shim_occupancy_launch(const struct shim_launch *l, unsigned int *smem)
{
	*smem = l->smem;
	return pad_on() ? pad_launch(l, smem) : 0;
}

void shim_occupancy_failed(const struct shim_launch *l, unsigned int padded, CUresult padded_rc,
			   CUresult plain_rc)
{
	struct kernel_rec *r;
	struct occ_state *s;
	char why[160];
	struct occ_pad p;

	if (plain_rc != CUDA_SUCCESS || !(r = shim_kernel(l->f, 0, NULL, NULL)))
		return; /* failed unpadded too: the padding is not what failed */
	s = find(r, key_of(r, -1));
	if (!s || atomic_exchange(&s->off, 1))
		return;
	shim_log_warn("SM120SHIM_EMULATE_OCCUPANCY: kernel %s padded to %u B of dynamic shared "
		      "memory was refused by the driver (CUresult %d) and ran unpadded (%u B); it "
		      "is not padded again", r->name, padded, (int)padded_rc, l->smem);
	snprintf(why, sizeof(why), "the padded launch was refused (CUresult %d): launched "
		 "unpadded, not padded again", (int)padded_rc);
	if (!decide(shim_current_device(), threads_of(l->block),
		    regs_of(r, l->f, shim_current_device()), r->static_smem, l->smem, &p))
		memset(&p, 0, sizeof(p));
	p.dynamic = padded;
	log_event(r, l, "failed", &p, why);
}

unsigned int shim_occupancy_bundled(const char *name, uint32_t static_smem, uint32_t regs,
				    const unsigned int block[3], unsigned int dynamic)
{
	struct occ_pad p;
	char key[320];

	if (!pad_on() || !decide(shim_current_device(), threads_of(block), regs, static_smem, dynamic,
				 &p) || p.verdict != OCC_PAD)
		return dynamic;
	snprintf(key, sizeof(key), "occupancy|bundled|%s|%u", name, dynamic);
	if (shim_log_first(key)) {
		const struct shim_launch l = { .via = SHIM_HOOK_cuLaunchKernel, .smem = dynamic,
					       .block = { block[0], block[1], block[2] },
					       .grid = { 1, 1, 1 } };
		const struct shim_config *c = shim_config();
		const struct shim_event_pad pad = { dynamic, p.dynamic, p.padded_blocks,
						    p.target_blocks, p.device_blocks };
		struct shim_event e = {
			.event = "occupancy", .level = "info", .action = "pad", .kernel = name,
			.via = "bundled", .target = c->target.name, .mode = route_mode_name(c->mode),
			.origin = "bundled", .static_smem = static_smem, .dynamic_smem = dynamic,
			.limit = -1, .kernels = -1, .regs = regs ? (int)regs : -1, .param_bytes = -1,
			.pad = &pad,
		};

		memcpy(e.block, l.block, sizeof(e.block));
		log_first_pad(name, &l, &p);
		shim_log_event(&e);
	}
	return p.dynamic;
}

/* -------------------------------------------------- what the process sees */

CUresult shim_occupancy_set(void *handle, CUdevice dev, int value, shim_dynamic_set_fn *set,
			    void *ctx)
{
	struct kernel_rec *r;
	struct occ_state *s;
	struct occ_attr a, after;
	CUresult rc;

	if (!pad_on() || !(r = handles_get(handle)))
		return set(ctx, value);
	occ_lock();
	s = find(r, key_of(r, dev));
	if (!s) {
		rc = set(ctx, value);
	} else {
		/* Padded launches (in other threads too) keep what they need. */
		a = attr_of(s);
		rc = set(ctx, occupancy_attr_set(&a, value, &after));
		if (rc == CUDA_SUCCESS) {
			atomic_store(&s->base, after.base);
			atomic_store(&s->raised, after.raised);
		}
	}
	occ_unlock();
	return rc;
}

int shim_occupancy_base(void *handle, CUdevice dev, int *value)
{
	struct kernel_rec *r;
	struct occ_state *s;
	int base;

	if (!pad_on() || !(r = handles_get(handle)))
		return 0;
	s = find(r, key_of(r, dev));
	if (!s || (base = atomic_load(&s->base)) == atomic_load(&s->raised))
		return 0;
	*value = base;
	return 1;
}
