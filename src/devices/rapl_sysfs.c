/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rapl_sysfs.c - the powercap sysfs source of RAPL counters (rapl_open, see
 * rapl.h), next to the simulated one in rapl_sim.c.
 *
 * It discovers package zones under a root directory, keeps each
 * `energy_uj` open and re-reads it with pread; wrap compensation and the
 * keepalive are the source-independent core's (rapl.c). Layout it expects
 * (as on Linux):
 *
 *   <root>/intel-rapl:0/{name,energy_uj,max_energy_range_uj}
 *   <root>/intel-rapl:0/intel-rapl:0:1/{name="dram",energy_uj,...}
 */
#include "rapl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"

/* At most this many packages are taken from a tree (real hosts have <= 16). */
#define RAPL_MAX_PACKAGES 256

int
rapl_parse_u64(const char *buf, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len == 0)
		return -1;
	for (i = 0; i < len; i++) {
		unsigned d;

		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		d = (unsigned)(buf[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

const char *
rapl_pick_root(const char *container, const char *host)
{
	struct stat st;

	if (stat(container, &st) == 0 && S_ISDIR(st.st_mode))
		return container;
	return host;
}

const char *
rapl_default_root(void)
{
	return rapl_pick_root(RAPL_ROOT_CONTAINER, RAPL_ROOT_HOST);
}

struct sysfs_counter {
	int fd;
	char path[PATH_MAX];
};

struct sysfs_pkg {
	struct sysfs_counter cpu;
	struct sysfs_counter dram;	/* fd -1 without DRAM */
};

struct sysfs_ctx {
	unsigned npkgs;
	struct sysfs_pkg *pkgs;
};

/* Quotes a path for an error message or log line. */
#define QPATH(buf, p) zlog_quote((buf), sizeof(buf), (p))

static int
sysfs_join(char *out, size_t size, const char *dir, const char *name,
    struct zerr *err)
{
	int n = snprintf(out, size, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= size)
		return zerr_set(err, ZERR_INTERNAL, "RAPL: path too long: %s/%s",
		    dir, name);
	return 0;
}

/*
 * Reads the whole of a small file through `fd` from offset 0. Sets *len;
 * fails when the content does not fit in size - 1 bytes.
 */
static int
sysfs_pread_all(int fd, char *buf, size_t size, size_t *len)
{
	ssize_t n = fileio_pread_all(fd, buf, size);

	if (n < 0)
		return -1;
	if ((size_t)n == size) {	/* no room left for the NUL */
		errno = EFBIG;
		return -1;
	}
	buf[n] = '\0';
	*len = (size_t)n;
	return 0;
}

/*
 * Opens a file that must be a regular file (sysfs attributes are).
 * O_NONBLOCK keeps a FIFO planted in a tree from hanging startup.
 */
static int
sysfs_open_file(const char *path, struct zerr *err)
{
	char q[PATH_MAX + 8];
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return zerr_set(err, errno == EACCES || errno == EPERM ?
		    ZERR_FORBIDDEN : ZERR_INTERNAL,
		    "RAPL: cannot open %s: %s%s", QPATH(q, path),
		    strerror(errno), errno == EACCES || errno == EPERM ?
		    " (reading RAPL counters needs root)" : "");
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL: %s is not a regular file", QPATH(q, path));
	}
	return fd;
}

/* Reads `path` whole (bounded) into buf; errors name the file. */
static int
sysfs_read_file(const char *path, char *buf, size_t size, size_t *len,
    struct zerr *err)
{
	char q[PATH_MAX + 8];
	int fd = sysfs_open_file(path, err);
	int rc;

	if (fd < 0)
		return -1;
	rc = sysfs_pread_all(fd, buf, size, len);
	if (rc != 0)
		zerr_set(err, ZERR_INTERNAL, "RAPL: cannot read %s: %s",
		    QPATH(q, path), errno == EFBIG ? "content too long" :
		    strerror(errno));
	close(fd);
	return rc;
}

static int
sysfs_read_u64_path(const char *path, uint64_t *v, struct zerr *err)
{
	char q[PATH_MAX + 8], buf[32];
	size_t len;

	if (sysfs_read_file(path, buf, sizeof(buf), &len, err) != 0)
		return -1;
	if (rapl_parse_u64(buf, len, v) != 0)
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL: %s does not hold a decimal counter", QPATH(q, path));
	return 0;
}

/* Reads a zone's `name` into out (trailing newline removed). */
static int
sysfs_read_name(const char *zone_dir, char *out, size_t size,
    struct zerr *err)
{
	char path[PATH_MAX], q[PATH_MAX + 8];
	size_t len;

	if (sysfs_join(path, sizeof(path), zone_dir, "name", err) != 0 ||
	    sysfs_read_file(path, out, size, &len, err) != 0)
		return -1;
	if (len > 0 && out[len - 1] == '\n')
		out[--len] = '\0';
	if (len == 0 || strlen(out) != len)
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL: %s holds no zone name", QPATH(q, path));
	return 0;
}

/*
 * Opens a zone's energy_uj (kept open) and reads max_energy_range_uj.
 */
static int
sysfs_open_zone(const char *zone_dir, struct sysfs_counter *c, uint64_t *max,
    struct zerr *err)
{
	char path[PATH_MAX];

	if (sysfs_join(path, sizeof(path), zone_dir, "max_energy_range_uj",
	    err) != 0 || sysfs_read_u64_path(path, max, err) != 0)
		return -1;
	if (sysfs_join(c->path, sizeof(c->path), zone_dir, "energy_uj",
	    err) != 0)
		return -1;
	c->fd = sysfs_open_file(c->path, err);
	return c->fd < 0 ? -1 : 0;
}

/*
 * Parses "<prefix><decimal u32>" exactly: no leading zeros (so
 * intel-rapl:01 cannot alias intel-rapl:1), no sign, nothing after.
 */
static bool
sysfs_parse_zone_name(const char *name, const char *prefix, unsigned *n)
{
	size_t plen = strlen(prefix), len;
	uint64_t v;

	if (strncmp(name, prefix, plen) != 0)
		return false;
	name += plen;
	len = strlen(name);
	if (len == 0 || len > 10 || (name[0] == '0' && len > 1))
		return false;
	if (rapl_parse_u64(name, len, &v) != 0 || name[len - 1] == '\n' ||
	    v > UINT32_MAX)
		return false;
	*n = (unsigned)v;
	return true;
}

static bool
sysfs_is_dir(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);

	return n > 0 && (size_t)n < sizeof(path) && stat(path, &st) == 0 &&
	    S_ISDIR(st.st_mode);
}

/*
 * Finds the DRAM subzone of package `id` in pkg_dir: the lowest-numbered
 * intel-rapl:<id>:M whose name is "dram". Sets *found.
 */
static int
sysfs_find_dram(const char *pkg_dir, unsigned id, char *dram_dir, size_t size,
    bool *found, struct zerr *err)
{
	char prefix[32], sub[PATH_MAX], zname[64];
	unsigned m, best = 0;
	struct dirent *de;
	DIR *d;

	*found = false;
	snprintf(prefix, sizeof(prefix), "intel-rapl:%u:", id);
	d = opendir(pkg_dir);
	if (d == NULL) {
		char q[PATH_MAX + 8];

		return zerr_set(err, ZERR_INTERNAL, "RAPL: cannot list %s: %s",
		    QPATH(q, pkg_dir), strerror(errno));
	}
	while ((de = readdir(d)) != NULL) {
		if (!sysfs_parse_zone_name(de->d_name, prefix, &m) ||
		    !sysfs_is_dir(pkg_dir, de->d_name))
			continue;
		if (sysfs_join(sub, sizeof(sub), pkg_dir, de->d_name,
		    err) != 0 || sysfs_read_name(sub, zname, sizeof(zname),
		    err) != 0) {
			closedir(d);
			return -1;
		}
		if (strcmp(zname, "dram") != 0)
			continue;
		if (*found) {
			zlog(ZLOG_WARN, "rapl_dram_duplicate", "cpu=%u "
			    "subzones=%u,%u using_lowest=true", id, best, m);
			if (m > best)
				continue;
		}
		*found = true;
		best = m;
		snprintf(dram_dir, size, "%s", sub);
	}
	closedir(d);
	return 0;
}

/* Opens package `id` (its directory is root/intel-rapl:<id>). */
static int
sysfs_open_pkg(const char *root, unsigned id, struct rapl_package_desc *desc,
    struct sysfs_pkg *sp, struct zerr *err)
{
	char dir[PATH_MAX], leaf[32], dram_dir[PATH_MAX];

	desc->id = id;
	snprintf(leaf, sizeof(leaf), "intel-rapl:%u", id);
	if (sysfs_join(dir, sizeof(dir), root, leaf, err) != 0 ||
	    sysfs_read_name(dir, desc->name, sizeof(desc->name), err) != 0 ||
	    sysfs_open_zone(dir, &sp->cpu, &desc->cpu_max_uj, err) != 0 ||
	    sysfs_find_dram(dir, id, dram_dir, sizeof(dram_dir),
	    &desc->has_dram, err) != 0)
		return -1;
	if (desc->has_dram &&
	    sysfs_open_zone(dram_dir, &sp->dram, &desc->dram_max_uj, err) != 0)
		return -1;
	return 0;
}

static int
sysfs_read(void *vctx, unsigned pkg, enum rapl_zone zone, uint64_t *raw,
    struct zerr *err)
{
	struct sysfs_ctx *ctx = vctx;
	struct sysfs_counter *c = zone == RAPL_ZONE_CPU ?
	    &ctx->pkgs[pkg].cpu : &ctx->pkgs[pkg].dram;
	char buf[32], q[PATH_MAX + 8];
	size_t len;

	if (sysfs_pread_all(c->fd, buf, sizeof(buf), &len) != 0)
		return zerr_set(err, ZERR_INTERNAL, "RAPL: cannot read %s: %s",
		    QPATH(q, c->path), errno == EFBIG ? "content too long" :
		    strerror(errno));
	if (rapl_parse_u64(buf, len, raw) != 0)
		return zerr_set(err, ZERR_INTERNAL,
		    "RAPL: %s does not hold a decimal counter",
		    QPATH(q, c->path));
	return 0;
}

static const char *
sysfs_label(void *vctx, unsigned pkg, enum rapl_zone zone)
{
	struct sysfs_ctx *ctx = vctx;

	return zone == RAPL_ZONE_CPU ? ctx->pkgs[pkg].cpu.path :
	    ctx->pkgs[pkg].dram.path;
}

static void
sysfs_destroy(void *vctx)
{
	struct sysfs_ctx *ctx = vctx;
	unsigned i;

	if (ctx == NULL)
		return;
	for (i = 0; i < ctx->npkgs; i++) {
		if (ctx->pkgs[i].cpu.fd >= 0)
			close(ctx->pkgs[i].cpu.fd);
		if (ctx->pkgs[i].dram.fd >= 0)
			close(ctx->pkgs[i].dram.fd);
	}
	free(ctx->pkgs);
	free(ctx);
}

static const struct rapl_source_ops sysfs_ops = {
	.name = "sysfs",
	.read = sysfs_read,
	.label = sysfs_label,
	.destroy = sysfs_destroy,
};

static int
sysfs_cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

/*
 * Lists the package ids under root, sorted. A missing root gives zero ids.
 */
static int
sysfs_list_packages(const char *root, unsigned *ids, unsigned *n,
    struct zerr *err)
{
	char q[PATH_MAX + 8], qn[NAME_MAX * 4 + 8];
	struct dirent *de;
	unsigned id;
	DIR *d;

	*n = 0;
	d = opendir(root);
	if (d == NULL && errno == ENOENT)
		return 0;
	if (d == NULL)
		return zerr_set(err, ZERR_INTERNAL, "RAPL: cannot list %s: %s",
		    QPATH(q, root), strerror(errno));
	while ((de = readdir(d)) != NULL) {
		if (!sysfs_parse_zone_name(de->d_name, "intel-rapl:", &id))
			continue;
		if (!sysfs_is_dir(root, de->d_name)) {
			zlog(ZLOG_WARN, "rapl_skip_entry", "entry=%s "
			    "reason=not_a_directory",
			    zlog_quote(qn, sizeof(qn), de->d_name));
			continue;
		}
		if (*n == RAPL_MAX_PACKAGES) {
			closedir(d);
			return zerr_set(err, ZERR_INTERNAL,
			    "RAPL: more than %u packages under %s",
			    RAPL_MAX_PACKAGES, QPATH(q, root));
		}
		ids[(*n)++] = id;
	}
	closedir(d);
	qsort(ids, *n, sizeof(*ids), sysfs_cmp_unsigned);
	return 0;
}

static void
sysfs_log_packages(const char *root, const struct rapl_package_desc *d,
    unsigned n)
{
	char q[PATH_MAX + 8], qn[80];
	unsigned i;

	zlog(ZLOG_INFO, "rapl_open", "root=%s packages=%u", QPATH(q, root), n);
	for (i = 0; i < n; i++)
		zlog(ZLOG_INFO, "rapl_package", "cpu=%u name=%s dram=%s "
		    "max_energy_range_uj=%llu", d[i].id,
		    zlog_quote(qn, sizeof(qn), d[i].name),
		    d[i].has_dram ? "true" : "false",
		    (unsigned long long)d[i].cpu_max_uj);
}

int
rapl_open(const char *root, struct rapl **out, struct zerr *err)
{
	struct rapl_package_desc *descs = NULL;
	struct sysfs_ctx *ctx;
	unsigned n, i;
	unsigned *idv;
	int rc;

	idv = calloc(RAPL_MAX_PACKAGES, sizeof(*idv));
	ctx = calloc(1, sizeof(*ctx));
	if (idv == NULL || ctx == NULL) {
		free(idv);
		free(ctx);
		return zerr_set(err, ZERR_INTERNAL, "RAPL: out of memory");
	}
	if (sysfs_list_packages(root, idv, &n, err) != 0)
		goto fail;
	ctx->pkgs = calloc(n > 0 ? n : 1, sizeof(*ctx->pkgs));
	descs = calloc(n > 0 ? n : 1, sizeof(*descs));
	if (ctx->pkgs == NULL || descs == NULL) {
		zerr_set(err, ZERR_INTERNAL, "RAPL: out of memory");
		goto fail;
	}
	for (i = 0; i < n; i++) {
		ctx->pkgs[i].cpu.fd = -1;
		ctx->pkgs[i].dram.fd = -1;
		ctx->npkgs = i + 1;
		if (sysfs_open_pkg(root, idv[i], &descs[i], &ctx->pkgs[i],
		    err) != 0)
			goto fail;
	}
	free(idv);
	rc = rapl_open_source(&sysfs_ops, ctx, descs, n, out, err);
	if (rc == 0)
		sysfs_log_packages(root, descs, n);
	free(descs);
	return rc;
fail:
	free(idv);
	free(descs);
	sysfs_destroy(ctx);
	return -1;
}
