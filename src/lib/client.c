/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - the zeusd client (include/zeus/client.h).
 *
 * Each call builds one request path with its query, runs it on the
 * client's kept-alive libcurl handle (under the client's lock, so a client
 * can be shared by threads), and turns the answer into the caller's
 * structs. Non-200 answers become ZEUS_ERR_HTTP with the daemon's own
 * message and status. Streams run on a handle of their own and feed the
 * SSE parser (sse.c), whose events are decoded here.
 */
#include "zeus/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/lease_label.h"
#include "lease_json.h"
#include "lib.h"
#include "os.h"
#include "sse.h"

#define CLIENT_URL_MAX 512

struct zeus_client {
	char *socket_path;		/* NULL: TCP or a pipe */
	char *pipe_name;		/* Windows named pipe; NULL: none */
	char base[CLIENT_URL_MAX];	/* "http://zeusd" or "http://h:p" */
	char *token;
	long timeout_ms;
	pthread_mutex_t lock;
	char lease_label[LEASE_LABEL_MAX + 1];	/* "": none; under lock */
	CURL *curl;
};

static const char *
client_env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && *v != '\0' ? v : NULL;
}

bool
zeus_client_env_configured(void)
{
	return client_env("ZEUSD_SOCK_PATH") != NULL ||
	    client_env("ZEUSD_HOST_PORT") != NULL ||
	    client_env("ZEUSD_PIPE_NAME") != NULL ||
	    lib_os_default_pipe() != NULL;
}

/* \\.\pipe\NAME: NAME 1-247 bytes without a backslash; Windows only. */
static int
client_check_pipe(const char *name, struct zeus_error *err)
{
	static const char prefix[] = "\\\\.\\pipe\\";

	if (!lib_os_has_pipes())
		return lib_err(err, ZEUS_ERR_INVALID, "named pipes exist only "
		    "on Windows (ZEUSD_PIPE_NAME, --pipe-name)");
	if (lib_check_name(name, 257) != 0 ||
	    strncmp(name, prefix, sizeof(prefix) - 1) != 0 ||
	    name[sizeof(prefix) - 1] == '\0' ||
	    strchr(name + sizeof(prefix) - 1, '\\') != NULL)
		return lib_err(err, ZEUS_ERR_INVALID, "zeusd pipe name must be "
		    "\\\\.\\pipe\\NAME (at most 256 bytes, no backslash in "
		    "NAME)");
	return 0;
}

/*
 * Where zeusd is when the caller named nothing: exactly one of the three
 * variables, else (Windows) the default pipe when it exists.
 */
static int
client_from_env(struct zeus_client_options *o, struct zeus_error *err)
{
	o->socket_path = client_env("ZEUSD_SOCK_PATH");
	o->host_port = client_env("ZEUSD_HOST_PORT");
	o->pipe_name = client_env("ZEUSD_PIPE_NAME");
	if ((o->socket_path != NULL) + (o->host_port != NULL) +
	    (o->pipe_name != NULL) > 1)
		return lib_err(err, ZEUS_ERR_INVALID, "give one of a socket "
		    "path, host:port and a pipe name (ZEUSD_SOCK_PATH, "
		    "ZEUSD_HOST_PORT and ZEUSD_PIPE_NAME: more than one set?)");
	if (o->socket_path == NULL && o->host_port == NULL &&
	    o->pipe_name == NULL &&
	    (o->pipe_name = lib_os_default_pipe()) == NULL)
		return lib_err(err, ZEUS_ERR_NOT_FOUND, "no zeusd configured: "
		    "set ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT or ZEUSD_PIPE_NAME");
	return 0;
}

/* host:port without anything that would change the URL's meaning. */
static int
client_check_host_port(const char *hp, struct zeus_error *err)
{
	if (lib_check_name(hp, 256) != 0 || strpbrk(hp, "/@?#\\ \t\r\n") ||
	    strchr(hp, ':') == NULL)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "zeusd address must be host:port (at most 255 bytes)");
	return 0;
}

static void
client_free(struct zeus_client *c)
{
	if (c == NULL)
		return;
	if (c->curl != NULL)
		curl_easy_cleanup(c->curl);
	pthread_mutex_destroy(&c->lock);
	free(c->socket_path);
	free(c->pipe_name);
	free(c->token);
	free(c);
}

int
zeus_client_open(const struct zeus_client_options *opt,
    struct zeus_client **out, struct zeus_error *err)
{
	struct zeus_client_options o = { 0 };
	struct zeus_client *c;

	*out = NULL;
	if (opt != NULL)
		o = *opt;
	if (o.socket_path == NULL && o.host_port == NULL &&
	    o.pipe_name == NULL && client_from_env(&o, err) != 0)
		return -1;
	if ((o.socket_path != NULL) + (o.host_port != NULL) +
	    (o.pipe_name != NULL) > 1)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "give one of a socket path, host:port and a pipe name");
	if (o.pipe_name != NULL && client_check_pipe(o.pipe_name, err) != 0)
		return -1;
	if (o.socket_path != NULL && lib_check_name(o.socket_path, 108) != 0)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "zeusd socket path is empty or longer than 107 bytes");
	if (o.host_port != NULL && client_check_host_port(o.host_port, err))
		return -1;
	if (o.token == NULL)
		o.token = client_env("ZEUSD_TOKEN");
	if (http_global_init(err) != 0)
		return -1;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	pthread_mutex_init(&c->lock, NULL);
	c->timeout_ms = o.timeout_ms ? (long)o.timeout_ms : 10000L;
	if (o.socket_path != NULL || o.pipe_name != NULL) {
		if (o.socket_path != NULL)
			c->socket_path = strdup(o.socket_path);
		else
			c->pipe_name = strdup(o.pipe_name);
		snprintf(c->base, sizeof(c->base), "http://zeusd");
	} else {
		snprintf(c->base, sizeof(c->base), "http://%s", o.host_port);
	}
	if (o.token != NULL)
		c->token = strdup(o.token);
	c->curl = curl_easy_init();
	if ((o.socket_path != NULL && c->socket_path == NULL) ||
	    (o.pipe_name != NULL && c->pipe_name == NULL) ||
	    (o.token != NULL && c->token == NULL) || c->curl == NULL) {
		client_free(c);
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	}
	*out = c;
	return 0;
}

void
zeus_client_close(struct zeus_client *c)
{
	client_free(c);
}

/* ---- requests -------------------------------------------------------------- */

/* Turns an error answer into ZEUS_ERR_HTTP with the daemon's message. */
static int
client_http_error(long status, const struct zbuf *body, const char *path,
    struct zeus_error *err)
{
	json_t *j = NULL, *e;
	char msg[ZEUS_ERR_MSG_MAX] = "";
	size_t used = 0;

	if (body->len > 0)
		j = json_loadb(body->data, body->len, 0, NULL);
	if (j != NULL && json_is_string(e = json_object_get(j, "error"))) {
		snprintf(msg, sizeof(msg), "%s", json_string_value(e));
	} else if (j != NULL && json_is_object(e = json_object_get(j,
	    "errors"))) {
		/* "gpu 1: <msg>; gpu 2: <msg>", as zeus.h promises. */
		const char *kind = strncmp(path, "/cpu/", 5) == 0 ? "cpu" :
		    "gpu";
		const char *key;
		json_t *v;

		json_object_foreach(e, key, v) {
			int n = snprintf(msg + used, sizeof(msg) - used,
			    "%s%s %s: %s", used ? "; " : "", kind, key,
			    json_is_string(v) ? json_string_value(v) : "?");

			if (n < 0 || (size_t)n >= sizeof(msg) - used)
				break;
			used += (size_t)n;
		}
	} else {
		snprintf(msg, sizeof(msg), "%.200s",
		    body->len ? body->data : "(empty body)");
	}
	json_decref(j);
	lib_err(err, ZEUS_ERR_HTTP, "zeusd %s: HTTP %ld: %s", path, status,
	    msg);
	if (err != NULL)
		err->http_status = status;
	return -1;
}

/*
 * Runs `method path` and, on 200, parses the body into *out (NULL when the
 * body is empty, as writes answer). `out` may be NULL.
 */
static int
client_call_as(struct zeus_client *c, const char *method, const char *path,
    bool labelled, json_t **out, struct zeus_error *err)
{
	char url[CLIENT_URL_MAX * 2];
	struct http_request rq = { 0 };
	struct http_response resp = { 0 };
	json_error_t jerr;
	int rc;

	if (out != NULL)
		*out = NULL;
	if ((size_t)snprintf(url, sizeof(url), "%s%s", c->base, path) >=
	    sizeof(url))
		return lib_err(err, ZEUS_ERR_INVALID, "request too long");
	rq.method = method;
	rq.url = url;
	rq.unix_socket = c->socket_path;
	rq.pipe_name = c->pipe_name;
	rq.bearer = c->token;
	rq.no_proxy = true;	/* the token is for zeusd, not for a proxy */
	rq.timeout_ms = c->timeout_ms;
	pthread_mutex_lock(&c->lock);
	if (labelled && c->lease_label[0] != '\0')
		rq.lease_label = c->lease_label;
	rc = http_perform(c->curl, &rq, &resp, err);
	pthread_mutex_unlock(&c->lock);
	if (rc != 0)
		goto out;
	if (resp.status != 200) {
		rc = client_http_error(resp.status, &resp.body, path, err);
		goto out;
	}
	if (out != NULL && resp.body.len > 0) {
		*out = json_loadb(resp.body.data, resp.body.len, 0, &jerr);
		if (*out == NULL)
			rc = lib_err(err, ZEUS_ERR_TRANSPORT,
			    "zeusd %s: bad JSON: %s", path, jerr.text);
	}
out:
	zbuf_free(&resp.body);
	return rc;
}

static int
client_call(struct zeus_client *c, const char *method, const char *path,
    json_t **out, struct zeus_error *err)
{
	return client_call_as(c, method, path, false, out, err);
}

/* Appends "<sep><name>=1,2,3" for a non-empty id list. */
static int
client_ids(struct zbuf *q, const char *name, const unsigned *ids,
    size_t nids, struct zeus_error *err)
{
	if (ids == NULL)
		return 0;
	if (nids == 0 || nids > ZEUS_MAX_DEVICES)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "device list must have 1..%d entries", ZEUS_MAX_DEVICES);
	zbuf_printf(q, "%s%s=", q->len ? "&" : "", name);
	for (size_t i = 0; i < nids; i++)
		zbuf_printf(q, "%s%u", i ? "," : "", ids[i]);
	return 0;
}

/* "/path" or "/path?query" into out. */
static int
client_path(char *out, size_t size, const char *path, const struct zbuf *q,
    struct zeus_error *err)
{
	int n;

	if (q->failed)
		return lib_err(err, ZEUS_ERR_INVALID, "query too long");
	n = snprintf(out, size, "%s%s%s", path, q->len ? "?" : "",
	    q->len ? q->data : "");
	if (n < 0 || (size_t)n >= size)
		return lib_err(err, ZEUS_ERR_INVALID, "query too long");
	return 0;
}

/* ---- decoding ---------------------------------------------------------------- */

/* Decimal device id key ("0".."4294967295"), canonical. */
static int
client_parse_id(const char *key, unsigned *id)
{
	char *end;
	unsigned long v;

	if (*key < '0' || *key > '9' || (key[0] == '0' && key[1] != '\0'))
		return -1;
	errno = 0;
	v = strtoul(key, &end, 10);
	if (errno != 0 || *end != '\0' || v > 0xffffffffUL)
		return -1;
	*id = (unsigned)v;
	return 0;
}

/* A non-negative JSON integer; NULL/absent is an error. */
static int
client_u64(json_t *obj, const char *field, uint64_t *out)
{
	json_t *v = json_object_get(obj, field);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* As client_u64, but JSON null (or absent) gives *has = false. */
static int
client_u64_or_null(json_t *obj, const char *field, uint64_t *out, bool *has)
{
	json_t *v = json_object_get(obj, field);

	*has = false;
	*out = 0;
	if (v == NULL || json_is_null(v))
		return 0;
	if (client_u64(obj, field, out) != 0)
		return -1;
	*has = true;
	return 0;
}

static int
client_bad(const char *path, struct zeus_error *err)
{
	return lib_err(err, ZEUS_ERR_TRANSPORT,
	    "zeusd %s: unexpected answer shape", path);
}

typedef int (*gpu_field_fn)(json_t *v, struct zeus_gpu_reading *r);

/* Decodes a {"<id>": <v>, ...} map into out->gpu[] with `fn` per value. */
static int
client_gpu_map(json_t *map, gpu_field_fn fn, struct zeus_gpu_readings *out,
    const char *path, struct zeus_error *err)
{
	const char *key;
	json_t *v;

	if (!json_is_object(map))
		return client_bad(path, err);
	json_object_foreach(map, key, v) {
		struct zeus_gpu_reading *r;

		if (out->count >= ZEUS_MAX_DEVICES)
			return lib_err(err, ZEUS_ERR_TRANSPORT,
			    "zeusd %s: more than %d GPUs", path,
			    ZEUS_MAX_DEVICES);
		r = &out->gpu[out->count];
		memset(r, 0, sizeof(*r));
		if (client_parse_id(key, &r->id) != 0 || fn(v, r) != 0)
			return client_bad(path, err);
		out->count++;
	}
	return 0;
}

static int
gpu_power_field(json_t *v, struct zeus_gpu_reading *r)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	r->power_mw = (uint64_t)json_integer_value(v);
	return 0;
}

static int
gpu_energy_field(json_t *v, struct zeus_gpu_reading *r)
{
	return client_u64(v, "energy_mj", &r->energy_mj);
}

static int
gpu_limit_field(json_t *v, struct zeus_gpu_reading *r)
{
	return client_u64(v, "power_limit_mw", &r->power_limit_mw);
}

static int
gpu_constraints_field(json_t *v, struct zeus_gpu_reading *r)
{
	return client_u64(v, "min_power_limit_mw", &r->min_power_limit_mw) ||
	    client_u64(v, "max_power_limit_mw", &r->max_power_limit_mw) ?
	    -1 : 0;
}

static int
gpu_persistence_field(json_t *v, struct zeus_gpu_reading *r)
{
	json_t *e = json_object_get(v, "enabled");

	if (!json_is_boolean(e))
		return -1;
	r->persistence_enabled = json_is_true(e);
	return 0;
}

/* GET a /gpu/ read and decode it. */
static int
client_gpu_read(struct zeus_client *c, const char *path, const unsigned *ids,
    size_t nids, gpu_field_fn fn, struct zeus_gpu_readings *out,
    struct zeus_error *err)
{
	char full[CLIENT_URL_MAX];
	struct zbuf q;
	json_t *j = NULL, *map;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	zbuf_init(&q, CLIENT_URL_MAX);
	if (client_ids(&q, "gpu_ids", ids, nids, err) != 0 ||
	    client_path(full, sizeof(full), path, &q, err) != 0 ||
	    client_call(c, "GET", full, &j, err) != 0)
		goto out;
	map = j;
	if (fn == gpu_power_field) {
		json_t *ts = json_object_get(j, "timestamp_ms");

		if (!json_is_integer(ts)) {
			rc = client_bad(path, err);
			goto out;
		}
		out->timestamp_ms = json_integer_value(ts);
		map = json_object_get(j, "power_mw");
	}
	rc = client_gpu_map(map, fn, out, path, err);
out:
	zbuf_free(&q);
	json_decref(j);
	return rc;
}

int
zeus_client_gpu_get_power(struct zeus_client *c, const unsigned *ids,
    size_t nids, struct zeus_gpu_readings *out, struct zeus_error *err)
{
	return client_gpu_read(c, "/gpu/get_power", ids, nids,
	    gpu_power_field, out, err);
}

int
zeus_client_gpu_get_cumulative_energy(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_gpu_readings *out,
    struct zeus_error *err)
{
	return client_gpu_read(c, "/gpu/get_cumulative_energy", ids, nids,
	    gpu_energy_field, out, err);
}

int
zeus_client_gpu_get_power_limit(struct zeus_client *c, const unsigned *ids,
    size_t nids, struct zeus_gpu_readings *out, struct zeus_error *err)
{
	return client_gpu_read(c, "/gpu/get_power_limit", ids, nids,
	    gpu_limit_field, out, err);
}

int
zeus_client_gpu_get_power_limit_constraints(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_gpu_readings *out,
    struct zeus_error *err)
{
	return client_gpu_read(c, "/gpu/get_power_limit_constraints", ids,
	    nids, gpu_constraints_field, out, err);
}

int
zeus_client_gpu_get_persistence_mode(struct zeus_client *c,
    const unsigned *ids, size_t nids, struct zeus_gpu_readings *out,
    struct zeus_error *err)
{
	return client_gpu_read(c, "/gpu/get_persistence_mode", ids, nids,
	    gpu_persistence_field, out, err);
}

/* ---- writes -------------------------------------------------------------------- */

/* POST path?gpu_ids=..&<extra>&block=..; extra may be NULL. */
static int
client_write(struct zeus_client *c, const char *path, const unsigned *ids,
    size_t nids, const char *extra, bool block, struct zeus_error *err)
{
	char full[CLIENT_URL_MAX];
	struct zbuf q;
	int rc = -1;

	if (ids == NULL || nids == 0)
		return lib_err(err, ZEUS_ERR_INVALID,
		    "a write needs at least one GPU id");
	zbuf_init(&q, CLIENT_URL_MAX);
	if (client_ids(&q, "gpu_ids", ids, nids, err) == 0) {
		if (extra != NULL)
			zbuf_printf(&q, "&%s", extra);
		zbuf_printf(&q, "&block=%s", block ? "true" : "false");
		if (client_path(full, sizeof(full), path, &q, err) == 0)
			rc = client_call_as(c, "POST", full, true, NULL, err);
	}
	zbuf_free(&q);
	return rc;
}

int
zeus_client_set_lease_label(struct zeus_client *c, const char *label,
    struct zeus_error *err)
{
	const char *bad = label != NULL ? lease_label_invalid(label) : NULL;

	if (bad != NULL)
		return lib_err(err, ZEUS_ERR_INVALID, "%s", bad);
	pthread_mutex_lock(&c->lock);
	snprintf(c->lease_label, sizeof(c->lease_label), "%s",
	    label != NULL ? label : "");
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int
zeus_client_gpu_set_power_limit(struct zeus_client *c, const unsigned *ids,
    size_t nids, uint32_t power_limit_mw, bool block, struct zeus_error *err)
{
	char extra[64];

	snprintf(extra, sizeof(extra), "power_limit_mw=%u",
	    (unsigned)power_limit_mw);
	return client_write(c, "/gpu/set_power_limit", ids, nids, extra,
	    block, err);
}

int
zeus_client_gpu_set_persistence_mode(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool enabled, bool block,
    struct zeus_error *err)
{
	return client_write(c, "/gpu/set_persistence_mode", ids, nids,
	    enabled ? "enabled=true" : "enabled=false", block, err);
}

static int
client_clocks(struct zeus_client *c, const char *path, const unsigned *ids,
    size_t nids, uint32_t lo, uint32_t hi, bool block,
    struct zeus_error *err)
{
	char extra[96];

	snprintf(extra, sizeof(extra), "min_clock_mhz=%u&max_clock_mhz=%u",
	    (unsigned)lo, (unsigned)hi);
	return client_write(c, path, ids, nids, extra, block, err);
}

int
zeus_client_gpu_set_gpu_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, uint32_t min_clock_mhz,
    uint32_t max_clock_mhz, bool block, struct zeus_error *err)
{
	return client_clocks(c, "/gpu/set_gpu_locked_clocks", ids, nids,
	    min_clock_mhz, max_clock_mhz, block, err);
}

int
zeus_client_gpu_set_mem_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, uint32_t min_clock_mhz,
    uint32_t max_clock_mhz, bool block, struct zeus_error *err)
{
	return client_clocks(c, "/gpu/set_mem_locked_clocks", ids, nids,
	    min_clock_mhz, max_clock_mhz, block, err);
}

int
zeus_client_gpu_reset_gpu_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool block, struct zeus_error *err)
{
	return client_write(c, "/gpu/reset_gpu_locked_clocks", ids, nids,
	    NULL, block, err);
}

int
zeus_client_gpu_reset_mem_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool block, struct zeus_error *err)
{
	return client_write(c, "/gpu/reset_mem_locked_clocks", ids, nids,
	    NULL, block, err);
}

int
zeus_client_gpu_reset_locked_clocks(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool block, struct zeus_error *err)
{
	return client_write(c, "/gpu/reset_locked_clocks", ids, nids, NULL,
	    block, err);
}

/* ---- leases ---------------------------------------------------------------------- */

int
zeus_client_gpu_leases(struct zeus_client *c, struct zeus_leases *out,
    struct zeus_error *err)
{
	static const char path[] = "/gpu/leases";
	json_t *j = NULL;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (client_call(c, "GET", path, &j, err) != 0)
		return -1;
	if (lease_json_leases(j, out) == 0)
		rc = 0;
	else
		rc = client_bad(path, err);
	json_decref(j);
	return rc;
}

int
zeus_client_gpu_release(struct zeus_client *c, const unsigned *ids,
    size_t nids, struct zeus_release *out, struct zeus_error *err)
{
	static const char path[] = "/gpu/release";
	char full[CLIENT_URL_MAX];
	struct zbuf q;
	json_t *j = NULL;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	zbuf_init(&q, CLIENT_URL_MAX);
	if (client_ids(&q, "gpu_ids", ids, nids, err) == 0 &&
	    client_path(full, sizeof(full), path, &q, err) == 0 &&
	    client_call(c, "POST", full, &j, err) == 0) {
		if (lease_json_release(j, out) == 0)
			rc = 0;
		else
			rc = client_bad(path, err);
	}
	zbuf_free(&q);
	json_decref(j);
	return rc;
}

/* ---- CPU ------------------------------------------------------------------------- */

static int
client_cpu_map(json_t *map, bool power, struct zeus_cpu_readings *out,
    const char *path, struct zeus_error *err)
{
	const char *key;
	json_t *v;

	if (!json_is_object(map))
		return client_bad(path, err);
	json_object_foreach(map, key, v) {
		struct zeus_cpu_reading *r;
		int bad;

		if (out->count >= ZEUS_MAX_DEVICES)
			return lib_err(err, ZEUS_ERR_TRANSPORT,
			    "zeusd %s: more than %d CPUs", path,
			    ZEUS_MAX_DEVICES);
		r = &out->cpu[out->count];
		memset(r, 0, sizeof(*r));
		if (client_parse_id(key, &r->id) != 0 || !json_is_object(v))
			return client_bad(path, err);
		if (power)
			bad = client_u64_or_null(v, "cpu_mw", &r->cpu_mw,
			    &r->has_cpu) || client_u64_or_null(v, "dram_mw",
			    &r->dram_mw, &r->has_dram);
		else
			bad = client_u64_or_null(v, "cpu_energy_uj",
			    &r->cpu_energy_uj, &r->has_cpu) ||
			    client_u64_or_null(v, "dram_energy_uj",
			    &r->dram_energy_uj, &r->has_dram);
		if (bad)
			return client_bad(path, err);
		out->count++;
	}
	return 0;
}

int
zeus_client_cpu_get_cumulative_energy(struct zeus_client *c,
    const unsigned *ids, size_t nids, bool cpu, bool dram,
    struct zeus_cpu_readings *out, struct zeus_error *err)
{
	static const char path[] = "/cpu/get_cumulative_energy";
	char full[CLIENT_URL_MAX];
	struct zbuf q;
	json_t *j = NULL;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	zbuf_init(&q, CLIENT_URL_MAX);
	zbuf_printf(&q, "cpu=%s&dram=%s", cpu ? "true" : "false",
	    dram ? "true" : "false");
	if (client_ids(&q, "cpu_ids", ids, nids, err) == 0 &&
	    client_path(full, sizeof(full), path, &q, err) == 0 &&
	    client_call(c, "GET", full, &j, err) == 0)
		rc = client_cpu_map(j, false, out, path, err);
	zbuf_free(&q);
	json_decref(j);
	return rc;
}

int
zeus_client_cpu_get_power(struct zeus_client *c, const unsigned *ids,
    size_t nids, struct zeus_cpu_readings *out, struct zeus_error *err)
{
	static const char path[] = "/cpu/get_power";
	char full[CLIENT_URL_MAX];
	struct zbuf q;
	json_t *j = NULL, *ts;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	zbuf_init(&q, CLIENT_URL_MAX);
	if (client_ids(&q, "cpu_ids", ids, nids, err) == 0 &&
	    client_path(full, sizeof(full), path, &q, err) == 0 &&
	    client_call(c, "GET", full, &j, err) == 0) {
		ts = json_object_get(j, "timestamp_ms");
		if (!json_is_integer(ts)) {
			rc = client_bad(path, err);
		} else {
			out->timestamp_ms = json_integer_value(ts);
			rc = client_cpu_map(json_object_get(j, "power_mw"),
			    true, out, path, err);
		}
	}
	zbuf_free(&q);
	json_decref(j);
	return rc;
}

/* ---- discover, time, whoami ------------------------------------------------------- */

static unsigned
client_groups(json_t *arr)
{
	unsigned g = 0;
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v) {
		const char *s = json_string_value(v);

		if (s == NULL)
			continue;
		if (strcmp(s, "gpu-control") == 0)
			g |= ZEUS_GROUP_GPU_CONTROL;
		else if (strcmp(s, "gpu-read") == 0)
			g |= ZEUS_GROUP_GPU_READ;
		else if (strcmp(s, "cpu-read") == 0)
			g |= ZEUS_GROUP_CPU_READ;
	}
	return g;
}

static int
client_discover_gpu(json_t *v, struct zeus_discovered_gpu *g)
{
	json_t *id = json_object_get(v, "id");
	json_t *e = json_object_get(v, "cumulative_energy_available");
	const char *name = json_string_value(json_object_get(v, "name"));
	const char *pci = json_string_value(json_object_get(v, "pci_address"));

	if (!json_is_integer(id) || json_integer_value(id) < 0 ||
	    json_integer_value(id) > 0xffffffffLL || !json_is_boolean(e))
		return -1;
	g->id = (unsigned)json_integer_value(id);
	g->cumulative_energy_available = json_is_true(e);
	snprintf(g->name, sizeof(g->name), "%s", name ? name : "");
	snprintf(g->pci_address, sizeof(g->pci_address), "%s",
	    pci ? pci : "");
	return 0;
}

int
zeus_client_discover(struct zeus_client *c, struct zeus_discovery *out,
    struct zeus_error *err)
{
	json_t *j = NULL, *gpus, *cpus, *v;
	size_t i;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (client_call(c, "GET", "/discover", &j, err) != 0)
		return -1;
	gpus = json_object_get(j, "gpus");
	cpus = json_object_get(j, "cpus");
	if (!json_is_array(gpus) || !json_is_array(cpus) ||
	    json_array_size(gpus) > ZEUS_MAX_DEVICES ||
	    json_array_size(cpus) > ZEUS_MAX_DEVICES)
		goto bad;
	json_array_foreach(gpus, i, v) {
		if (client_discover_gpu(v, &out->gpus[i]) != 0)
			goto bad;
	}
	out->gpu_count = json_array_size(gpus);
	json_array_foreach(cpus, i, v) {
		json_t *id = json_object_get(v, "id");
		json_t *d = json_object_get(v, "dram_available");

		if (!json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) > 0xffffffffLL ||
		    !json_is_boolean(d))
			goto bad;
		out->cpus[i].id = (unsigned)json_integer_value(id);
		out->cpus[i].dram_available = json_is_true(d);
	}
	out->cpu_count = json_array_size(cpus);
	out->enabled_groups = client_groups(json_object_get(j,
	    "enabled_api_groups"));
	out->auth_required = json_is_true(json_object_get(j, "auth_required"));
	rc = 0;
	goto out;
bad:
	rc = client_bad("/discover", err);
out:
	json_decref(j);
	return rc;
}

int
zeus_client_time(struct zeus_client *c, int64_t *timestamp_ms,
    struct zeus_error *err)
{
	json_t *j = NULL, *ts;
	int rc = -1;

	if (client_call(c, "GET", "/time", &j, err) != 0)
		return -1;
	ts = json_object_get(j, "timestamp_ms");
	if (json_is_integer(ts)) {
		*timestamp_ms = json_integer_value(ts);
		rc = 0;
	} else {
		rc = client_bad("/time", err);
	}
	json_decref(j);
	return rc;
}

int
zeus_client_whoami(struct zeus_client *c, struct zeus_whoami *out,
    struct zeus_error *err)
{
	json_t *j = NULL, *exp;
	const char *sub;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (client_call(c, "GET", "/auth/whoami", &j, err) != 0)
		return -1;
	sub = json_string_value(json_object_get(j, "sub"));
	if (sub == NULL) {
		rc = client_bad("/auth/whoami", err);
	} else {
		snprintf(out->sub, sizeof(out->sub), "%s", sub);
		out->scopes = client_groups(json_object_get(j, "scopes"));
		exp = json_object_get(j, "exp");
		out->has_exp = json_is_integer(exp);
		out->exp = out->has_exp ? json_integer_value(exp) : 0;
		rc = 0;
	}
	json_decref(j);
	return rc;
}

/* The bits of a JSON array of device ids (0..63; others left out). */
static uint64_t
client_id_bits(json_t *arr)
{
	uint64_t bits = 0;
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v) {
		json_int_t id = json_integer_value(v);

		if (json_is_integer(v) && id >= 0 && id < 64)
			bits |= UINT64_C(1) << id;
	}
	return bits;
}

int
zeus_client_access(struct zeus_client *c, struct zeus_access *out,
    struct zeus_error *err)
{
	json_t *j = NULL, *dev;
	struct zeus_error e;

	memset(out, 0, sizeof(*out));
	if (client_call(c, "GET", "/auth/whoami", &j, &e) != 0) {
		if (e.code == ZEUS_ERR_HTTP && e.http_status == 404)
			return 0;	/* not said: every device */
		if (err != NULL)
			*err = e;
		return -1;
	}
	dev = json_object_get(j, "devices");
	if (!json_is_object(dev) && json_is_array(json_object_get(j,
	    "scopes"))) {
		/* a token's answer: its scopes reach every device */
		unsigned g = client_groups(json_object_get(j, "scopes"));

		out->known = true;
		out->gpu_read = g & ZEUS_GROUP_GPU_READ ? UINT64_MAX : 0;
		out->gpu_control = g & ZEUS_GROUP_GPU_CONTROL ? UINT64_MAX : 0;
		out->cpu_read = g & ZEUS_GROUP_CPU_READ ? UINT64_MAX : 0;
	} else if (json_is_object(dev)) {
		out->known = true;
		out->gpu_read = client_id_bits(json_object_get(dev,
		    "gpu-read"));
		out->gpu_control = client_id_bits(json_object_get(dev,
		    "gpu-control"));
		out->cpu_read = client_id_bits(json_object_get(dev,
		    "cpu-read"));
	}
	json_decref(j);
	return 0;
}

/* ---- streams ---------------------------------------------------------------------- */

struct client_stream {
	struct sse_parser sse;
	zeus_sample_fn fn;
	void *user;
	bool gpu;
	int cb_stopped;		/* the user's callback returned non-zero */
	int bad;		/* a malformed event */
	long status;		/* not 200: collect the body instead */
	struct zbuf errbody;
	CURL *curl;
};

static int
client_stream_event(const char *data, size_t len, void *user)
{
	struct client_stream *s = user;
	struct zeus_power_sample smp = { 0 };
	json_t *j = json_loadb(data, len, 0, NULL), *id, *ts;
	int bad;

	smp.is_gpu = s->gpu;
	id = json_object_get(j, s->gpu ? "gpu_id" : "cpu_id");
	ts = json_object_get(j, "timestamp_ms");
	bad = !json_is_integer(id) || json_integer_value(id) < 0 ||
	    json_integer_value(id) > 0xffffffffLL || !json_is_integer(ts);
	if (!bad) {
		smp.id = (unsigned)json_integer_value(id);
		smp.timestamp_ms = json_integer_value(ts);
		if (s->gpu) {
			bad = client_u64(j, "power_mw", &smp.power_mw);
		} else {
			bool has_cpu;

			bad = client_u64_or_null(j, "cpu_mw", &smp.cpu_mw,
			    &has_cpu) || client_u64_or_null(j, "dram_mw",
			    &smp.dram_mw, &smp.has_dram);
		}
	}
	json_decref(j);
	if (bad) {
		s->bad = 1;
		return 1;
	}
	if (s->fn(&smp, s->user) != 0) {
		s->cb_stopped = 1;
		return 1;
	}
	return 0;
}

static int
client_stream_chunk(const char *p, size_t n, void *user)
{
	struct client_stream *s = user;

	if (s->status == 0)
		curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->status);
	if (s->status != 200)
		return zbuf_append(&s->errbody, p, n) != 0;
	if (sse_feed(&s->sse, p, n) != 0) {
		if (!s->cb_stopped)
			s->bad = 1;
		return 1;
	}
	return 0;
}

static int
client_stream(struct zeus_client *c, bool gpu, const unsigned *ids,
    size_t nids, zeus_sample_fn fn, void *user, const volatile bool *stop,
    struct zeus_error *err)
{
	const char *path = gpu ? "/gpu/stream_power" : "/cpu/stream_power";
	char full[CLIENT_URL_MAX], url[CLIENT_URL_MAX * 2];
	struct client_stream s = { 0 };
	struct http_request rq = { 0 };
	struct http_response resp = { 0 };
	static const bool never = false;
	struct zbuf q;
	int rc;

	zbuf_init(&q, CLIENT_URL_MAX);
	rc = client_ids(&q, gpu ? "gpu_ids" : "cpu_ids", ids, nids, err);
	if (rc == 0)
		rc = client_path(full, sizeof(full), path, &q, err);
	zbuf_free(&q);
	if (rc != 0)
		return -1;
	snprintf(url, sizeof(url), "%s%s", c->base, full);
	s.curl = curl_easy_init();
	if (s.curl == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "curl_easy_init failed");
	sse_init(&s.sse, client_stream_event, &s);
	zbuf_init(&s.errbody, 65536);
	s.fn = fn;
	s.user = user;
	s.gpu = gpu;
	rq.method = "GET";
	rq.url = url;
	rq.unix_socket = c->socket_path;
	rq.pipe_name = c->pipe_name;
	rq.bearer = c->token;
	rq.no_proxy = true;	/* the token is for zeusd, not for a proxy */
	rq.on_chunk = client_stream_chunk;
	rq.user = &s;
	rq.stop = stop != NULL ? stop : &never;
	rc = http_perform(s.curl, &rq, &resp, err);
	if (rc == 0 && resp.status != 200 && resp.status != 0)
		rc = client_http_error(resp.status, &s.errbody, path, err);
	else if (rc == 0 && s.bad)
		rc = lib_err(err, ZEUS_ERR_TRANSPORT,
		    "zeusd %s: malformed event", path);
	else if (rc == 0 && !s.cb_stopped && !(stop != NULL &&
	    __atomic_load_n(stop, __ATOMIC_ACQUIRE)))
		rc = lib_err(err, ZEUS_ERR_TRANSPORT,
		    "zeusd %s: stream ended", path);
	sse_free(&s.sse);
	zbuf_free(&s.errbody);
	zbuf_free(&resp.body);
	curl_easy_cleanup(s.curl);
	return rc;
}

int
zeus_client_gpu_stream_power(struct zeus_client *c, const unsigned *ids,
    size_t nids, zeus_sample_fn fn, void *user, const volatile bool *stop,
    struct zeus_error *err)
{
	return client_stream(c, true, ids, nids, fn, user, stop, err);
}

int
zeus_client_cpu_stream_power(struct zeus_client *c, const unsigned *ids,
    size_t nids, zeus_sample_fn fn, void *user, const volatile bool *stop,
    struct zeus_error *err)
{
	return client_stream(c, false, ids, nids, fn, user, stop, err);
}
