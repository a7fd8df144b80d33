/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_host.c - the TCP Host check (host.h): which connections it
 * applies to, which Host values a connection to a given local address may
 * carry, and which --tcp-allowed-hosts values start-up takes.
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

#define CHECKED(l, auth) assert_true(host_check_applies( \
	(const struct sockaddr *)(l), (auth)))
#define UNCHECKED(l, auth) assert_false(host_check_applies( \
	(const struct sockaddr *)(l), (auth)))

static void
test_check_applies(void **state)
{
	struct sockaddr_in lo = v4("127.0.0.1"), lo9 = v4("127.9.8.7"),
	    any = v4("0.0.0.0"), lan = v4("10.200.0.1"), pub = v4("8.8.4.4"),
	    lo_next = v4("128.0.0.1"), lo_prev = v4("126.255.255.255");
	struct sockaddr_in6 lo6 = v6("::1"), any6 = v6("::"),
	    m_lo = v6("::ffff:127.0.0.1"), m_lo9 = v6("::ffff:127.255.0.3"),
	    m_lan = v6("::ffff:10.200.0.1"), ula = v6("fd00:200::1"),
	    ll = v6("fe80::1"), compat = v6("::127.0.0.1");

	(void)state;
	/* without auth: loopback only (and the unspecified or unknown) */
	CHECKED(&lo, false);
	CHECKED(&lo9, false);
	CHECKED(&lo6, false);
	CHECKED(&m_lo, false);
	CHECKED(&m_lo9, false);
	CHECKED(&any, false);
	CHECKED(&any6, false);
	CHECKED(NULL, false);
	UNCHECKED(&lan, false);
	UNCHECKED(&pub, false);
	UNCHECKED(&lo_next, false);
	UNCHECKED(&lo_prev, false);
	UNCHECKED(&m_lan, false);
	UNCHECKED(&ula, false);
	UNCHECKED(&ll, false);
	UNCHECKED(&compat, false);	/* not a mapped address */
	/* with auth: nowhere */
	UNCHECKED(&lo, true);
	UNCHECKED(&lo6, true);
	UNCHECKED(&m_lo, true);
	UNCHECKED(&any, true);
	UNCHECKED(NULL, true);
	UNCHECKED(&lan, true);
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
		cmocka_unit_test(test_check_applies),
		cmocka_unit_test(test_list_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
