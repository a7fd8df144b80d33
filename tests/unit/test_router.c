/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_router.c - path canonicalisation and the route table's invariants
 * (every route's scope is its group; writes are POST and gpu-control).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/routes.h"
#include "http/router.h"
#include "http/stats.h"

static void
canon_is(const char *raw, const char *want)
{
	char out[256];

	if (router_canonical_path(raw, strlen(raw), out, sizeof(out)) != 0)
		fail_msg("'%s' refused", raw);
	if (strcmp(out, want) != 0)
		fail_msg("'%s' -> '%s', want '%s'", raw, out, want);
}

static void
canon_fails(const char *raw)
{
	char out[256];

	if (router_canonical_path(raw, strlen(raw), out, sizeof(out)) == 0)
		fail_msg("'%s' accepted as '%s'", raw, out);
}

static void
test_canonical(void **state)
{
	canon_is("/time", "/time");
	canon_is("/", "/");
	canon_is("", "/");
	canon_is("//time", "/time");
	canon_is("/time/", "/time");
	canon_is("/./time", "/time");
	canon_is("/gpu/../time", "/time");
	canon_is("/../../time", "/time");
	canon_is("/gpu/./get_power//", "/gpu/get_power");
	canon_is("/%67pu/get_power", "/gpu/get_power");
	canon_is("/gpu%2Fset_power_limit", "/gpu/set_power_limit");
	canon_is("/gpu/%2e%2e/time", "/time");
	canon_is("/a+b", "/a+b");
	canon_is("/GPU/get_power", "/GPU/get_power");	/* case kept: 404 */
	canon_is("/x/y/z/../../..", "/");
	canon_fails("/%zz");
	canon_fails("/time%00");
	canon_fails("/%");
}

static void
test_too_long(void **state)
{
	char raw[2048], out[256];

	memset(raw, 'a', sizeof(raw));
	raw[0] = '/';
	assert_int_equal(router_canonical_path(raw, sizeof(raw), out,
	    sizeof(out)), -1);
	assert_int_equal(router_canonical_path(raw, 300, out, sizeof(out)),
	    -1);
}

static void
test_table_invariants(void **state)
{
	const struct routes *rt = api_routes();
	const struct route *r = rt->table;
	size_t n = rt->n;

	assert_true(n >= 17);
	/* every route gets its own request counter in /metrics */
	assert_true(n <= STATS_MAX_ROUTES);
	for (size_t i = 0; i < n; i++) {
		bool write = strncmp(r[i].path, "/gpu/set_", 9) == 0 ||
		    strncmp(r[i].path, "/gpu/reset_", 11) == 0 ||
		    strcmp(r[i].path, "/gpu/release") == 0 ||
		    strncmp(r[i].path, "/slurm/", 7) == 0;

		assert_ptr_equal(router_lookup(rt, r[i].path), &r[i]);
		if (write) {
			assert_string_equal(r[i].method, "POST");
			assert_int_equal(r[i].group, GROUP_GPU_CONTROL);
		} else {
			assert_string_equal(r[i].method, "GET");
		}
		if (strncmp(r[i].path, "/gpu/get_", 9) == 0 ||
		    strcmp(r[i].path, "/gpu/stream_power") == 0 ||
		    strcmp(r[i].path, "/gpu/leases") == 0)
			assert_int_equal(r[i].group, GROUP_GPU_READ);
		if (strncmp(r[i].path, "/cpu/", 5) == 0)
			assert_int_equal(r[i].group, GROUP_CPU_READ);
		if (r[i].group >= 0)
			assert_int_equal(r[i].access, ROUTE_SCOPE);
		else
			assert_true(strcmp(r[i].path, "/discover") == 0 ||
			    strcmp(r[i].path, "/time") == 0 ||
			    strcmp(r[i].path, "/auth/whoami") == 0);
	}
	assert_null(router_lookup(rt, "/gpu/set_power_limit/"));
	assert_null(router_lookup(rt, "/GPU/set_power_limit"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_canonical),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_table_invariants),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
