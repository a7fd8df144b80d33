/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_host.c - the TCP Host check (host.h): which Host values a
 * connection to a given local address may carry, and which
 * --tcp-allowed-hosts values start-up takes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "http/host.h"

static struct sockaddr_in
v4(const char *a)
{
	struct sockaddr_in sa;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, a, &sa.sin_addr), 1);
	return sa;
}

static struct sockaddr_in6
v6(const char *a)
{
	struct sockaddr_in6 sa;

	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, a, &sa.sin6_addr), 1);
	return sa;
}

#define OK(h, l, list) assert_true(host_allowed((h), \
	(const struct sockaddr *)(l), (list)))
#define NO(h, l, list) assert_false(host_allowed((h), \
	(const struct sockaddr *)(l), (list)))

static void
test_loopback_v4(void **state)
{
	struct sockaddr_in lo = v4("127.0.0.1");

	(void)state;
	OK(NULL, &lo, NULL);
	OK("127.0.0.1", &lo, NULL);
	OK("127.0.0.1:4938", &lo, NULL);
	OK("localhost:1", &lo, NULL);
	OK("LOCALHOST.", &lo, NULL);
	NO("", &lo, NULL);
	NO("127.0.0.2", &lo, NULL);
	NO("attacker.example:4938", &lo, NULL);
	NO("127.0.0.1:", &lo, NULL);
	NO("127.0.0.1:123456", &lo, NULL);
	NO("127.0.0.1:80:80", &lo, NULL);
	NO("[127.0.0.1]", &lo, NULL);
	NO("[::1]", &lo, NULL);
	OK("gpu.example:4938", &lo, "a.example,GPU.example.");
	NO("gpu.example.x", &lo, "gpu.example");
}

static void
test_other_addresses(void **state)
{
	struct sockaddr_in lan = v4("10.0.0.7");
	struct sockaddr_in6 lo6 = v6("::1"), mapped = v6("::ffff:10.0.0.7");

	(void)state;
	OK("10.0.0.7:4938", &lan, NULL);
	NO("localhost", &lan, NULL);		/* not a loopback address */
	OK("[::1]:4938", &lo6, NULL);
	OK("localhost", &lo6, NULL);
	NO("::1", &lo6, NULL);
	NO("127.0.0.1", &lo6, NULL);
	OK("10.0.0.7", &mapped, NULL);
	NO("[::ffff:10.0.0.8]", &mapped, NULL);
	OK("[fe80::1]:1", &lan, "[fe80::1]");
}

static void
test_list_check(void **state)
{
	char bad[80];

	(void)state;
	assert_int_equal(host_list_check("a.example,b-1,10.0.0.1,[::1]", bad,
	    sizeof(bad)), 0);
	assert_int_equal(host_list_check("", bad, sizeof(bad)), -1);
	assert_int_equal(host_list_check("a,,b", bad, sizeof(bad)), -1);
	assert_int_equal(host_list_check("a b", bad, sizeof(bad)), -1);
	assert_string_equal(bad, "a b");
	assert_int_equal(host_list_check("[::1", bad, sizeof(bad)), -1);
	assert_int_equal(host_list_check("[x]", bad, sizeof(bad)), -1);
	assert_int_equal(host_list_check("::1", bad, sizeof(bad)), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loopback_v4),
		cmocka_unit_test(test_other_addresses),
		cmocka_unit_test(test_list_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
