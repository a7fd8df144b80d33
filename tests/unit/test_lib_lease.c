/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lib_lease.c - unit tests of libzeus's energy ledger calls
 * (zeus_client_gpu_leases, zeus_client_gpu_release; src/lib/client.c and
 * lease_json.c) against a fake zeusd: a thread answering canned JSON on a
 * Unix socket in a temporary directory, which records each request line
 * and counts connections. The real daemon's answers are tested black-box
 * in tests/integration/test_zeus_measure_cap.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/lease_json.h"
#include "zeus/zeus.h"

/* ---- the fake zeusd ----------------------------------------------------- */

struct fake {
	char dir[64];
	char path[96];
	int lfd;
	pthread_t thread;
	pthread_mutex_t lock;
	bool stop;
	int status;			/* the canned answer */
	char *body;
	char request[512];		/* the last request line */
	char head[8192];		/* ... and its whole head */
	unsigned nreq, nconn;
};

static struct fake fk;

/* Reads one request head (the tests send no bodies); 0 at EOF. */
static ssize_t
fake_read_head(int fd, char *buf, size_t size)
{
	size_t len = 0;

	while (len + 1 < size) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n <= 0)
			return n;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n") != NULL)
			return (ssize_t)len;
	}
	return -1;
}

static void
fake_serve(int fd)
{
	char head[8192], out[1 << 17];

	while (fake_read_head(fd, head, sizeof(head)) > 0) {
		int n;

		pthread_mutex_lock(&fk.lock);
		snprintf(fk.request, sizeof(fk.request), "%.*s",
		    (int)strcspn(head, "\r"), head);
		snprintf(fk.head, sizeof(fk.head), "%s", head);
		fk.nreq++;
		n = snprintf(out, sizeof(out), "HTTP/1.1 %d X\r\n"
		    "Content-Type: application/json\r\n"
		    "Content-Length: %zu\r\n\r\n%s", fk.status,
		    strlen(fk.body), fk.body);
		pthread_mutex_unlock(&fk.lock);
		if (n < 0 || (size_t)n >= sizeof(out) ||
		    write(fd, out, (size_t)n) != n)
			break;
	}
}

static void *
fake_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(fk.lfd, NULL, NULL);
		bool stop;

		if (fd < 0)
			return NULL;
		pthread_mutex_lock(&fk.lock);
		stop = fk.stop;
		if (!stop)
			fk.nconn++;
		pthread_mutex_unlock(&fk.lock);
		if (!stop)
			fake_serve(fd);
		close(fd);
		if (stop)
			return NULL;
	}
}

static void
fake_answer(int status, const char *body)
{
	pthread_mutex_lock(&fk.lock);
	free(fk.body);
	fk.body = strdup(body);
	fk.status = status;
	fk.request[0] = '\0';
	pthread_mutex_unlock(&fk.lock);
	assert_non_null(fk.body);
}

static int
setup(void **state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	(void)state;
	memset(&fk, 0, sizeof(fk));
	pthread_mutex_init(&fk.lock, NULL);
	snprintf(fk.dir, sizeof(fk.dir), "/tmp/zeus-lease-XXXXXX");
	assert_non_null(mkdtemp(fk.dir));
	snprintf(fk.path, sizeof(fk.path), "%s/s", fk.dir);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", fk.path);
	fk.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fk.lfd >= 0);
	assert_int_equal(bind(fk.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fk.lfd, 8), 0);
	fake_answer(200, "{}");
	assert_int_equal(pthread_create(&fk.thread, NULL, fake_main, NULL),
	    0);
	return 0;
}

static int
teardown(void **state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	(void)state;
	pthread_mutex_lock(&fk.lock);
	fk.stop = true;
	pthread_mutex_unlock(&fk.lock);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", fk.path);
	/* wakes accept(); the thread then leaves */
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		fprintf(stderr, "teardown connect: %s\n", strerror(errno));
	pthread_join(fk.thread, NULL);
	if (fd >= 0)
		close(fd);
	close(fk.lfd);
	unlink(fk.path);
	rmdir(fk.dir);
	free(fk.body);
	pthread_mutex_destroy(&fk.lock);
	return 0;
}

static struct zeus_client *
client(void)
{
	struct zeus_client_options o = { .socket_path = fk.path,
	    .timeout_ms = 5000 };
	struct zeus_client *c = NULL;
	struct zeus_error e;

	assert_int_equal(zeus_client_open(&o, &c, &e), 0);
	return c;
}

static void
assert_request(const char *want)
{
	pthread_mutex_lock(&fk.lock);
	assert_string_equal(fk.request, want);
	pthread_mutex_unlock(&fk.lock);
}

/* ---- GET /gpu/leases ------------------------------------------------------ */

static const char leases_body[] =
    "{\"leases\":[{\"gpu\":0,\"uid\":1001,\"user\":\"alice\",\"pid\":4711,"
    "\"cgroup\":\"/user.slice/user-1001.slice/session-3.scope\","
    "\"label\":null,\"state\":\"held\",\"start\":1764539000.25,"
    "\"end\":null,\"duration_s\":2.5,\"energy_j\":750.125,"
    "\"energy\":\"ok\",\"avg_w\":300.05,"
    "\"settings\":[\"power_limit\",\"gpu_clocks\"]}],"
    "\"ended\":[{\"gpu\":1,\"uid\":1002,\"user\":null,\"pid\":99,"
    "\"cgroup\":null,\"label\":null,\"state\":\"ended\","
    "\"start\":1764538000.0,\"end\":1764538010.5,\"duration_s\":10.5,"
    "\"energy_j\":null,\"energy\":\"unavailable\",\"avg_w\":null,"
    "\"settings\":[\"mem_clocks\",\"persistence\"],"
    "\"reason\":\"process_exit\"}],"
    "\"unleased\":[{\"gpu\":0,\"energy_j\":1234.5},"
    "{\"gpu\":1,\"energy_j\":null}]}";

static void
test_leases_decoded(void **state)
{
	static struct zeus_leases l;
	struct zeus_client *c = client();
	struct zeus_error e;
	const struct zeus_lease *r;

	(void)state;
	fake_answer(200, leases_body);
	assert_int_equal(zeus_client_gpu_leases(c, &l, &e), 0);
	assert_request("GET /gpu/leases HTTP/1.1");
	assert_int_equal(l.count, 1);
	r = &l.leases[0];
	assert_int_equal(r->gpu, 0);
	assert_int_equal(r->uid, 1001);
	assert_string_equal(r->user, "alice");
	assert_int_equal(r->pid, 4711);
	assert_string_equal(r->cgroup,
	    "/user.slice/user-1001.slice/session-3.scope");
	assert_string_equal(r->label, "");
	assert_int_equal(r->state, ZEUS_LEASE_HELD);
	assert_true(r->has_start && !r->has_end);
	assert_float_equal(r->start, 1764539000.25, 1e-6);
	assert_float_equal(r->duration_s, 2.5, 0);
	assert_int_equal(r->energy, ZEUS_LEASE_ENERGY_OK);
	assert_float_equal(r->energy_j, 750.125, 0);
	assert_true(r->has_avg_w);
	assert_float_equal(r->avg_w, 300.05, 0);
	assert_int_equal(r->settings, ZEUS_SETTING_POWER_LIMIT |
	    ZEUS_SETTING_GPU_CLOCKS);
	assert_string_equal(r->reason, "");

	assert_int_equal(l.ended_count, 1);
	r = &l.ended[0];
	assert_int_equal(r->gpu, 1);
	assert_string_equal(r->user, "");
	assert_string_equal(r->cgroup, "");
	assert_int_equal(r->state, ZEUS_LEASE_ENDED);
	assert_true(r->has_end);
	assert_float_equal(r->end, 1764538010.5, 1e-6);
	assert_int_equal(r->energy, ZEUS_LEASE_ENERGY_UNAVAILABLE);
	assert_float_equal(r->energy_j, 0, 0);
	assert_false(r->has_avg_w);
	assert_int_equal(r->settings, ZEUS_SETTING_MEM_CLOCKS |
	    ZEUS_SETTING_PERSISTENCE);
	assert_string_equal(r->reason, "process_exit");

	assert_int_equal(l.unleased_count, 2);
	assert_true(l.unleased[0].has_energy);
	assert_float_equal(l.unleased[0].energy_j, 1234.5, 0);
	assert_int_equal(l.unleased[1].gpu, 1);
	assert_false(l.unleased[1].has_energy);
	zeus_client_close(c);
}

/* A record with one member replaced by `member` ("\"k\":v"). */
static char *
record_with(const char *key, const char *member)
{
	static const char *const base[] = {
		"\"gpu\":2", "\"uid\":1001", "\"user\":\"alice\"", "\"pid\":7",
		"\"cgroup\":null", "\"label\":null", "\"state\":\"held\"",
		"\"start\":1.5", "\"end\":null", "\"duration_s\":1",
		"\"energy_j\":3", "\"energy\":\"ok\"", "\"avg_w\":3",
		"\"settings\":[]",
	};
	char *out = calloc(1, 8192);
	size_t klen = strlen(key);

	assert_non_null(out);
	strcat(out, "{");
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		const char *m = base[i];

		if (key[0] != '\0' && strncmp(m + 1, key, klen) == 0 &&
		    m[klen + 1] == '"')
			m = member;
		if (m[0] == '\0')
			continue;	/* left out */
		if (out[1] != '\0')
			strcat(out, ",");
		strcat(out, m);
	}
	strcat(out, "}");
	return out;
}

static int
decode_record(const char *text, struct zeus_lease *r)
{
	json_t *j = json_loads(text, JSON_ALLOW_NUL, NULL);
	int rc;

	assert_non_null(j);
	rc = lease_json_record(j, r);
	json_decref(j);
	return rc;
}

static void
test_record_checks_every_field(void **state)
{
	static const struct { const char *key, *member; } bad[] = {
		{ "gpu", "\"gpu\":\"0\"" },
		{ "gpu", "\"gpu\":-1" },
		{ "gpu", "\"gpu\":4294967296" },
		{ "gpu", "" },
		{ "uid", "\"uid\":1.5" },
		{ "pid", "\"pid\":null" },
		{ "user", "\"user\":7" },
		{ "user", "\"user\":\"a\\u0000b\"" },
		{ "state", "\"state\":\"bogus\"" },
		{ "state", "\"state\":\"heldheldheldheldheld\"" },
		{ "state", "\"state\":\"ended\"" },	/* ended without end */
		{ "state", "" },
		{ "energy", "\"energy\":\"pending\"" },	/* pending with J */
		{ "energy", "\"energy\":null" },
		{ "energy_j", "\"energy_j\":null" },	/* ok without J */
		{ "energy_j", "\"energy_j\":-1" },
		{ "energy_j", "\"energy_j\":\"3\"" },
		{ "duration_s", "" },
		{ "duration_s", "\"duration_s\":-0.5" },
		{ "start", "\"start\":true" },
		{ "avg_w", "\"avg_w\":[]" },
		{ "settings", "\"settings\":\"power_limit\"" },
		{ "settings", "\"settings\":[1]" },
		{ "settings", "" },
	};
	struct zeus_lease r;
	char *t;

	(void)state;
	t = record_with("", "");
	assert_int_equal(decode_record(t, &r), 0);
	free(t);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = record_with(bad[i].key, bad[i].member);
		if (decode_record(t, &r) != -1)
			fail_msg("accepted: %s", t);
		free(t);
	}
	/* nullable strings may be absent; unknown settings are skipped */
	t = record_with("user", "");
	assert_int_equal(decode_record(t, &r), 0);
	assert_string_equal(r.user, "");
	free(t);
	t = record_with("settings", "\"settings\":[\"power_limit\",\"fan\"]");
	assert_int_equal(decode_record(t, &r), 0);
	assert_int_equal(r.settings, ZEUS_SETTING_POWER_LIMIT);
	free(t);
	/*
	 * Another user's lease as zeusd answers it (docs/api.md, "Who sees
	 * what of a record"): pid 0, no cgroup or label, and "details",
	 * which this version does not read
	 */
	t = record_with("pid", "\"pid\":0,\"details\":false");
	assert_int_equal(decode_record(t, &r), 0);
	assert_int_equal(r.pid, 0);
	assert_string_equal(r.cgroup, "");
	assert_string_equal(r.label, "");
	assert_string_equal(r.user, "alice");
	free(t);
}

static void
test_long_strings_are_cut_at_a_character(void **state)
{
	char text[4096], user[200], cg[600];
	struct zeus_lease r;
	size_t n;

	(void)state;
	memset(user, 'u', 100);
	user[100] = '\0';
	/* 254 ASCII bytes, then "é" (2 bytes): 256 do not fit in 255 */
	memset(cg, 'c', 254);
	strcpy(cg + 254, "\xc3\xa9tail");
	n = (size_t)snprintf(text, sizeof(text), "{\"gpu\":0,\"uid\":0,"
	    "\"user\":\"%s\",\"pid\":1,\"cgroup\":\"%s\",\"label\":null,"
	    "\"state\":\"held\",\"start\":null,\"end\":null,\"duration_s\":0,"
	    "\"energy_j\":null,\"energy\":\"pending\",\"avg_w\":null,"
	    "\"settings\":[],\"new_field\":{\"x\":1}}", user, cg);
	assert_true(n < sizeof(text));
	assert_int_equal(decode_record(text, &r), 0);
	assert_int_equal(strlen(r.user), sizeof(r.user) - 1);
	assert_int_equal(strlen(r.cgroup), 254);
	assert_int_equal(r.energy, ZEUS_LEASE_ENERGY_PENDING);
	assert_false(r.has_start);
}

static void
test_bad_answers_are_errors(void **state)
{
	static const char *const bodies[] = {
		"[]",
		"{\"leases\":[],\"ended\":[]}",
		"{\"leases\":{},\"ended\":[],\"unleased\":[]}",
		"{\"leases\":[],\"ended\":[],\"unleased\":[{\"energy_j\":1}]}",
		"{\"leases\":[7],\"ended\":[],\"unleased\":[]}",
	};
	static struct zeus_leases l;
	struct zeus_client *c = client();
	struct zeus_error e;

	(void)state;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		fake_answer(200, bodies[i]);
		memset(&e, 0, sizeof(e));
		if (zeus_client_gpu_leases(c, &l, &e) != -1)
			fail_msg("accepted: %s", bodies[i]);
		assert_int_equal(e.code, ZEUS_ERR_TRANSPORT);
		assert_non_null(strstr(e.message, "/gpu/leases"));
		assert_int_equal(l.count, 0);
	}
	/* {"gpu":0} alone lacks energy_j: null and absent are alike */
	fake_answer(200, "{\"leases\":[],\"ended\":[],\"unleased\":"
	    "[{\"gpu\":0}]}");
	assert_int_equal(zeus_client_gpu_leases(c, &l, &e), 0);
	assert_false(l.unleased[0].has_energy);
	fake_answer(200, "{\"leases\":");
	assert_int_equal(zeus_client_gpu_leases(c, &l, &e), -1);
	assert_non_null(strstr(e.message, "bad JSON"));
	zeus_client_close(c);
}

/* n copies of a record in a JSON array. */
static char *
records(unsigned n, const char *one)
{
	size_t len = strlen(one) + 1;
	char *out = malloc(n * len + 3), *p = out;

	assert_non_null(out);
	*p++ = '[';
	for (unsigned i = 0; i < n; i++) {
		if (i > 0)
			*p++ = ',';
		memcpy(p, one, len - 1);
		p += len - 1;
	}
	*p++ = ']';
	*p = '\0';
	return out;
}

static void
test_lists_are_bounded(void **state)
{
	static const char ended[] = "{\"gpu\":0,\"uid\":1,\"user\":\"a\","
	    "\"pid\":2,\"cgroup\":null,\"label\":null,\"state\":\"ended\","
	    "\"start\":1,\"end\":2,\"duration_s\":1,\"energy_j\":5,"
	    "\"energy\":\"ok\",\"avg_w\":5,\"settings\":[],"
	    "\"reason\":\"release\"}";
	static struct zeus_leases l;
	struct zeus_client *c = client();
	struct zeus_error e;
	char *arr, *body;
	size_t size;

	(void)state;
	/* more ended leases than kept: the newest (first) ones stay */
	arr = records(ZEUS_LEASES_ENDED_MAX + 6, ended);
	size = strlen(arr) + 64;
	body = malloc(size);
	assert_non_null(body);
	snprintf(body, size, "{\"leases\":[],\"ended\":%s,\"unleased\":[]}",
	    arr);
	fake_answer(200, body);
	assert_int_equal(zeus_client_gpu_leases(c, &l, &e), 0);
	assert_int_equal(l.ended_count, ZEUS_LEASES_ENDED_MAX);
	/* more open leases than GPUs a client knows: an error */
	snprintf(body, size, "{\"leases\":%s,\"ended\":[],\"unleased\":[]}",
	    arr);
	fake_answer(200, body);
	assert_int_equal(zeus_client_gpu_leases(c, &l, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_TRANSPORT);
	free(arr);
	free(body);
	zeus_client_close(c);
}

static void
test_leases_off_is_the_daemons_404(void **state)
{
	static struct zeus_leases l;
	struct zeus_client *c = client();
	struct zeus_error e;

	(void)state;
	fake_answer(404, "{\"error\":\"GPU leases are not enabled on this "
	    "server (zeusd serve --gpu-leases)\"}");
	assert_int_equal(zeus_client_gpu_leases(c, &l, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_HTTP);
	assert_int_equal(e.http_status, 404);
	assert_non_null(strstr(e.message, "--gpu-leases"));
	zeus_client_close(c);
}

/* ---- POST /gpu/release -------------------------------------------------- */

static void
test_release_decoded_on_one_connection(void **state)
{
	static struct zeus_release rel;
	static struct zeus_leases l;
	const unsigned ids[] = { 0, 3 };
	struct zeus_client *c = client();
	struct zeus_error e;
	unsigned conns;

	(void)state;
	pthread_mutex_lock(&fk.lock);
	conns = fk.nconn;
	pthread_mutex_unlock(&fk.lock);
	fake_answer(200, "{\"leases\":[],\"ended\":[],\"unleased\":[]}");
	assert_int_equal(zeus_client_gpu_leases(c, &l, &e), 0);
	fake_answer(200, "{\"released\":[{\"gpu\":0,\"uid\":1001,\"user\":"
	    "\"alice\",\"pid\":4711,\"cgroup\":\"/x\",\"label\":null,"
	    "\"state\":\"ended\",\"start\":10,\"end\":12,\"duration_s\":2,"
	    "\"energy_j\":600.5,\"energy\":\"ok\",\"avg_w\":300.25,"
	    "\"settings\":[\"power_limit\"],\"reason\":\"release\"}],"
	    "\"not_leased\":[3]}");
	assert_int_equal(zeus_client_gpu_release(c, ids, 2, &rel, &e), 0);
	assert_request("POST /gpu/release?gpu_ids=0,3 HTTP/1.1");
	assert_int_equal(rel.count, 1);
	assert_string_equal(rel.released[0].user, "alice");
	assert_int_equal(rel.released[0].state, ZEUS_LEASE_ENDED);
	assert_float_equal(rel.released[0].energy_j, 600.5, 0);
	assert_string_equal(rel.released[0].reason, "release");
	assert_int_equal(rel.not_leased_count, 1);
	assert_int_equal(rel.not_leased[0], 3);
	/* both requests went over the client's one kept-alive connection */
	pthread_mutex_lock(&fk.lock);
	assert_int_equal(fk.nconn, conns + 1);
	pthread_mutex_unlock(&fk.lock);

	/* no ids: every GPU, no query */
	fake_answer(200, "{\"released\":[],\"not_leased\":[0,1]}");
	assert_int_equal(zeus_client_gpu_release(c, NULL, 0, &rel, &e), 0);
	assert_request("POST /gpu/release HTTP/1.1");
	assert_int_equal(rel.count, 0);
	assert_int_equal(rel.not_leased_count, 2);
	zeus_client_close(c);
}

/* zeus_client_set_lease_label: the header on writes only, checked first */
static bool
head_has(const char *line)
{
	bool has;

	pthread_mutex_lock(&fk.lock);
	has = strstr(fk.head, line) != NULL;
	pthread_mutex_unlock(&fk.lock);
	return has;
}

static void
test_lease_label_header(void **state)
{
	static struct zeus_leases l;
	const unsigned ids[] = { 1 };
	struct zeus_client *c = client();
	struct zeus_error e;

	(void)state;
	fake_answer(200, "");
	assert_int_equal(zeus_client_set_lease_label(c, "slurm:42.0", &e), 0);
	assert_int_equal(zeus_client_gpu_set_power_limit(c, ids, 1, 200000,
	    true, &e), 0);
	assert_true(head_has("\r\nX-Zeus-Lease-Label: slurm:42.0\r\n"));
	fake_answer(200, "{\"leases\":[],\"ended\":[],\"unleased\":[]}");
	assert_int_equal(zeus_client_gpu_leases(c, &l, &e), 0);
	assert_false(head_has("X-Zeus-Lease-Label"));
	/* refused, and the label in force stays */
	assert_int_equal(zeus_client_set_lease_label(c, "a b", &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	assert_int_equal(zeus_client_set_lease_label(c, "", &e), -1);
	fake_answer(200, "");
	assert_int_equal(zeus_client_gpu_reset_locked_clocks(c, ids, 1, false,
	    &e), 0);
	assert_true(head_has("\r\nX-Zeus-Lease-Label: slurm:42.0\r\n"));
	/* NULL: none from now on */
	assert_int_equal(zeus_client_set_lease_label(c, NULL, &e), 0);
	assert_int_equal(zeus_client_gpu_set_power_limit(c, ids, 1, 200000,
	    true, &e), 0);
	assert_false(head_has("X-Zeus-Lease-Label"));
	zeus_client_close(c);
}

static void
test_release_errors(void **state)
{
	static const char *const bad[] = {
		"{\"released\":[]}",
		"{\"released\":[],\"not_leased\":[-1]}",
		"{\"released\":[],\"not_leased\":[\"0\"]}",
		"{\"released\":[{}],\"not_leased\":[]}",
		"",
	};
	static struct zeus_release rel;
	const unsigned ids[] = { 1 };
	struct zeus_client *c = client();
	struct zeus_error e;

	(void)state;
	fake_answer(409, "{\"error\":\"GPU 1 is leased by user bob (uid "
	    "1002, pid 5); only that user or root can release it\"}");
	assert_int_equal(zeus_client_gpu_release(c, ids, 1, &rel, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_HTTP);
	assert_int_equal(e.http_status, 409);
	assert_non_null(strstr(e.message, "leased by user bob"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fake_answer(200, bad[i]);
		if (zeus_client_gpu_release(c, ids, 1, &rel, &e) != -1)
			fail_msg("accepted: '%s'", bad[i]);
		assert_int_equal(e.code, ZEUS_ERR_TRANSPORT);
	}
	/* a list that is given must name a GPU: nothing is sent */
	pthread_mutex_lock(&fk.lock);
	fk.request[0] = '\0';
	pthread_mutex_unlock(&fk.lock);
	assert_int_equal(zeus_client_gpu_release(c, ids, 0, &rel, &e), -1);
	assert_int_equal(e.code, ZEUS_ERR_INVALID);
	assert_request("");
	zeus_client_close(c);
}

static void
test_names(void **state)
{
	(void)state;
	assert_string_equal(zeus_lease_state_name(ZEUS_LEASE_RESTORING),
	    "restoring");
	assert_string_equal(zeus_lease_energy_name(ZEUS_LEASE_ENERGY_PENDING),
	    "pending");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_leases_decoded),
		cmocka_unit_test(test_record_checks_every_field),
		cmocka_unit_test(test_long_strings_are_cut_at_a_character),
		cmocka_unit_test(test_bad_answers_are_errors),
		cmocka_unit_test(test_lists_are_bounded),
		cmocka_unit_test(test_leases_off_is_the_daemons_404),
		cmocka_unit_test(test_release_decoded_on_one_connection),
		cmocka_unit_test(test_lease_label_header),
		cmocka_unit_test(test_release_errors),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
