/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state_file.c - a fixed-layout state file shared by processes
 * (state_file.h): its header, size and checksum, and its opening, locking,
 * reading and writing. The records are the simulators' own.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "state_file.h"

#define SIM_MAGIC_LEN	8

struct sim_file_header {
	char magic[SIM_MAGIC_LEN];	/* def->magic */
	uint32_t version;		/* def->version */
	uint32_t header_size;		/* sizeof(struct sim_file_header) */
	uint32_t record_size;		/* def->record_size */
	uint32_t count;			/* records */
	uint64_t checksum;		/* FNV-1a 64 of the file, this 0 */
	uint64_t reserved[2];		/* 0 */
};

_Static_assert(sizeof(struct sim_file_header) == 48, "header layout");

#define SIM_FNV_INIT	0xcbf29ce484222325ULL

static uint64_t
sim_fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The checksum of an image of len bytes (at least a header), computed
 * with its checksum field 0. */
static uint64_t
sim_checksum(const unsigned char *buf, size_t len)
{
	static const unsigned char zero[sizeof(uint64_t)];
	const size_t at = offsetof(struct sim_file_header, checksum);
	uint64_t h = SIM_FNV_INIT;

	h = sim_fnv1a(h, buf, at);
	h = sim_fnv1a(h, zero, sizeof(zero));
	return sim_fnv1a(h, buf + at + sizeof(zero), len - at - sizeof(zero));
}

void
sim_state_file_complain(struct sim_state_file *f, const char *fmt, ...)
{
	char why[192];
	va_list ap;

	if (f->failing)
		return;
	f->failing = true;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: ZEUS_SIM_STATE %.200s: %s\n", f->def->prefix,
	    f->path, why);
}

/* The bytes of a file of n records. */
static size_t
sim_file_size(const struct sim_state_file *f, unsigned n)
{
	return sizeof(struct sim_file_header) +
	    (size_t)n * f->def->record_size;
}

/* The records' image, into buf (SIM_STATE_FILE_MAX bytes); its size. */
static size_t
sim_file_encode(struct sim_state_file *f, unsigned char *buf)
{
	const struct sim_state_file_def *d = f->def;
	struct sim_file_header h;
	size_t len = sim_file_size(f, f->count);

	memset(buf, 0, len);
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, d->magic, sizeof(h.magic));
	h.version = d->version;
	h.header_size = sizeof(struct sim_file_header);
	h.record_size = d->record_size;
	h.count = f->count;
	memcpy(buf, &h, sizeof(h));
	for (unsigned i = 0; i < f->count; i++)
		d->encode(i, buf + sim_file_size(f, i));
	h.checksum = sim_checksum(buf, len);
	memcpy(buf, &h, sizeof(h));
	return len;
}

/*
 * Checks the file's image (len bytes) and, if every check passes, has
 * its records loaded (f->changed: whether a load said true). -1 after a
 * complaint, nothing loaded.
 */
static int
sim_file_decode(struct sim_state_file *f, const unsigned char *buf,
    size_t len)
{
	const struct sim_state_file_def *d = f->def;
	struct sim_file_header h;
	size_t want = sim_file_size(f, f->count);

	if (len < sizeof(h)) {
		sim_state_file_complain(f, "truncated (%zu bytes, shorter "
		    "than its header)", len);
		return -1;
	}
	memcpy(&h, buf, sizeof(h));
	if (memcmp(h.magic, d->magic, sizeof(h.magic)) != 0) {
		sim_state_file_complain(f, "not %s state file (bad magic)",
		    d->what);
		return -1;
	}
	if (h.version != d->version ||
	    h.header_size != sizeof(struct sim_file_header) ||
	    h.record_size != d->record_size) {
		sim_state_file_complain(f, "unsupported version %lu or sizes "
		    "%lu/%lu (want %lu, %zu/%lu, in this machine's byte order)",
		    (unsigned long)h.version, (unsigned long)h.header_size,
		    (unsigned long)h.record_size, (unsigned long)d->version,
		    sizeof(struct sim_file_header),
		    (unsigned long)d->record_size);
		return -1;
	}
	if (h.count != f->count) {
		sim_state_file_complain(f, "made for %lu GPUs, this "
		    "configuration has %u %s", (unsigned long)h.count,
		    f->count, d->count_hint);
		return -1;
	}
	if (len != want) {
		sim_state_file_complain(f, "%s (%zu bytes, want %zu)",
		    len < want ? "truncated" : "has trailing bytes", len, want);
		return -1;
	}
	if (sim_checksum(buf, len) != h.checksum) {
		sim_state_file_complain(f, "checksum mismatch (garbled)");
		return -1;
	}
	if (h.reserved[0] != 0 || h.reserved[1] != 0) {
		sim_state_file_complain(f, "reserved header fields set");
		return -1;
	}
	for (unsigned i = 0; i < f->count; i++) {
		const unsigned char *rec = buf + sim_file_size(f, i);

		if (d->identify(f, i, rec) != 0)
			return -1;
		if (!d->valid(i, rec)) {
			sim_state_file_complain(f, "GPU %u's record holds values "
			    "out of range", i);
			return -1;
		}
	}
	f->changed = false;
	for (unsigned i = 0; i < f->count; i++)
		if (d->load(i, buf + sim_file_size(f, i)))
			f->changed = true;
	return 0;
}

/* Reads the file into buf (SIM_STATE_FILE_MAX + 1 bytes): at most one
 * byte more than the largest valid file, to tell one with trailing bytes.
 * The count read, or -1 after a complaint. */
static long
sim_file_read(struct sim_state_file *f, unsigned char *buf)
{
	long n = sim_os_state_read(f->fd, buf,
	    sim_file_size(f, f->def->max_count) + 1);

	if (n < 0)
		sim_state_file_complain(f, "cannot read: %s", strerror(errno));
	return n;
}

int
sim_state_file_begin(struct sim_state_file *f, bool exclusive)
{
	unsigned char buf[SIM_STATE_FILE_MAX + 1];
	long n;

	if (f->fd < 0)
		return 0;
	if (sim_os_state_lock(f->fd, exclusive) != 0) {
		sim_state_file_complain(f, "cannot lock: %s", strerror(errno));
		return -1;
	}
	n = sim_file_read(f, buf);
	if (n >= 0 && sim_file_decode(f, buf, (size_t)n) == 0) {
		f->failing = false;
		return 0;
	}
	sim_os_state_unlock(f->fd);
	return -1;
}

int
sim_state_file_end(struct sim_state_file *f, bool write)
{
	unsigned char buf[SIM_STATE_FILE_MAX];
	int rc = 0;

	if (f->fd < 0)
		return 0;
	if (write && sim_os_state_write(f->fd, buf,
	    sim_file_encode(f, buf)) != 0) {
		sim_state_file_complain(f, "cannot write: %s",
		    strerror(errno));
		rc = -1;
	}
	sim_os_state_unlock(f->fd);
	return rc;
}

void
sim_state_file_close(struct sim_state_file *f)
{
	sim_os_state_close(f->fd);
	f->fd = -1;
}

bool
sim_state_file_is_open(const struct sim_state_file *f)
{
	return f->fd >= 0;
}

bool
sim_state_file_time(uint64_t stored, uint64_t *t)
{
	uint64_t now = sim_now_ns();

	*t = stored > now ? now : stored;
	return stored > now;
}

bool
sim_state_file_changed(const struct sim_state_file *f)
{
	return f->fd >= 0 && f->changed;
}

int
sim_state_file_open(struct sim_state_file *f, const char *path,
    unsigned count)
{
	const struct sim_state_file_def *d = f->def;
	unsigned char buf[SIM_STATE_FILE_MAX + 1];
	char why[128];
	long n;

	sim_state_file_close(f);
	f->count = count < d->max_count ? count : d->max_count;
	f->failing = false;
	f->changed = false;
	snprintf(f->path, sizeof(f->path), "%s", path);
	if (strlen(path) >= sizeof(f->path)) {
		sim_state_file_complain(f, "path too long (at most %zu bytes)",
		    sizeof(f->path) - 1);
		return -1;
	}
	/* A layout this module cannot hold: the simulator's mistake. */
	if (strlen(d->magic) != SIM_MAGIC_LEN || d->record_size == 0 ||
	    d->max_count > (SIM_STATE_FILE_MAX -
	    sizeof(struct sim_file_header)) / d->record_size) {
		sim_state_file_complain(f, "bad record layout (at most %d "
		    "bytes)", SIM_STATE_FILE_MAX);
		return -1;
	}
	if ((f->fd = sim_os_state_open(path, why, sizeof(why))) < 0) {
		sim_state_file_complain(f, "%s", why);
		return -1;
	}
	if (sim_os_state_lock(f->fd, true) != 0) {
		sim_state_file_complain(f, "cannot lock: %s", strerror(errno));
		goto fail;
	}
	n = sim_file_read(f, buf);
	/* Empty: new, made here or by another process; it gets the power-on
	 * state. Else it must pass every check. */
	if (n == 0 ||
	    (n > 0 && sim_file_decode(f, buf, (size_t)n) == 0)) {
		if (sim_state_file_end(f, n == 0 || f->changed) == 0)
			return 0;
		goto fail;		/* unlocked */
	}
	sim_os_state_unlock(f->fd);
fail:
	sim_state_file_close(f);
	return -1;
}
