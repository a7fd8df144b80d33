/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host.c - the Host check on TCP against DNS rebinding (see host.h).
 * Pure functions of the header, the connection's local address, whether
 * auth is on and the configured list: no state, no allocation.
 */
#include "http/host.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/*
 * Splits a Host value into its name (without port or brackets, one
 * trailing dot dropped) in `name`; `v6` says it was bracketed. -1 when it
 * is not a host[:port] at all.
 */
static int
host_split(const char *host, char *name, size_t size, bool *v6)
{
	const char *end, *colon;
	size_t len;

	*v6 = false;
	if (host[0] == '[') {
		if ((end = strchr(host, ']')) == NULL)
			return -1;
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] != '\0' && colon == NULL)
			return -1;
		host++;
		*v6 = true;
	} else {
		colon = strchr(host, ':');
		if (colon != NULL && strchr(colon + 1, ':') != NULL)
			return -1;	/* an IPv6 literal needs brackets */
		end = colon != NULL ? colon : host + strlen(host);
	}
	if (colon != NULL) {
		size_t digits = strspn(colon + 1, "0123456789");

		if (digits == 0 || digits > 5 || colon[1 + digits] != '\0')
			return -1;
	}
	len = (size_t)(end - host);
	if (len > 0 && host[len - 1] == '.' && !*v6)
		len--;
	if (len == 0 || len >= size)
		return -1;
	memcpy(name, host, len);
	name[len] = '\0';
	return 0;
}

/* Whether `name` is in the comma-separated `list`, ignoring case and a
 * trailing dot of the entry. */
static bool
host_in_list(const char *name, const char *list)
{
	size_t n = strlen(name);

	while (list != NULL && *list != '\0') {
		const char *comma = strchr(list, ',');
		size_t len = comma != NULL ? (size_t)(comma - list) :
		    strlen(list);
		size_t cmp = len;

		if (cmp > 0 && list[cmp - 1] == '.')
			cmp--;
		if (cmp > 2 && list[0] == '[' && list[cmp - 1] == ']') {
			if (cmp - 2 == n && strncasecmp(list + 1, name, n) == 0)
				return true;
		} else if (cmp == n && strncasecmp(list, name, n) == 0)
			return true;
		list = comma != NULL ? comma + 1 : NULL;
	}
	return false;
}

/* The local address as IPv4 (a mapped IPv6 one too): true and `out`. */
static bool
host_local_v4(const struct sockaddr *local, struct in_addr *out)
{
	if (local->sa_family == AF_INET) {
		*out = ((const struct sockaddr_in *)(const void *)local)->sin_addr;
		return true;
	}
	if (local->sa_family == AF_INET6) {
		const struct in6_addr *a =
		    &((const struct sockaddr_in6 *)(const void *)local)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			memcpy(&out->s_addr, a->s6_addr + 12, 4);
			return true;
		}
	}
	return false;
}

static bool
host_local_loopback(const struct sockaddr *local)
{
	struct in_addr v4;

	if (host_local_v4(local, &v4))
		return (ntohl(v4.s_addr) >> 24) == 127;
	return local->sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(
	    &((const struct sockaddr_in6 *)(const void *)local)->sin6_addr);
}

bool
host_check_applies(const struct sockaddr *local, bool auth)
{
	struct in_addr v4;

	if (auth)
		return false;
	if (local == NULL || host_local_loopback(local))
		return true;
	/* 0.0.0.0 and :: reach loopback: checked, should one ever show up */
	if (host_local_v4(local, &v4))
		return v4.s_addr == htonl(INADDR_ANY);
	return local->sa_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(
	    &((const struct sockaddr_in6 *)(const void *)local)->sin6_addr);
}

bool
host_allowed(const char *host, const struct sockaddr *local,
    const char *allowed)
{
	char name[HOST_NAME_MAX_LEN + 1];
	struct in6_addr a6;
	struct in_addr a4, l4;
	bool v6;

	if (host == NULL)
		return true;
	if (host_split(host, name, sizeof(name), &v6) != 0)
		return false;
	if (host_in_list(name, allowed))
		return true;
	if (v6)
		return local != NULL && local->sa_family == AF_INET6 &&
		    inet_pton(AF_INET6, name, &a6) == 1 &&
		    memcmp(&a6, &((const struct sockaddr_in6 *)(const void *)
		    local)->sin6_addr, sizeof(a6)) == 0;
	if (inet_pton(AF_INET, name, &a4) == 1)
		return local != NULL && host_local_v4(local, &l4) &&
		    a4.s_addr == l4.s_addr;
	return strcasecmp(name, "localhost") == 0 && local != NULL &&
	    host_local_loopback(local);
}

int
host_list_check(const char *list, char *bad, size_t badsize)
{
	unsigned count = 0;

	for (const char *p = list;; ) {
		const char *comma = strchr(p, ',');
		size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		bool ok = len > 0 && len <= HOST_NAME_MAX_LEN;
		struct in6_addr a6;
		char tmp[HOST_NAME_MAX_LEN + 1];

		if (ok && p[0] == '[') {
			ok = len > 2 && p[len - 1] == ']';
			if (ok) {
				memcpy(tmp, p + 1, len - 2);
				tmp[len - 2] = '\0';
				ok = inet_pton(AF_INET6, tmp, &a6) == 1;
			}
		} else if (ok)
			ok = strspn(p, "abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") >= len;
		if (!ok || ++count > HOST_LIST_MAX) {
			snprintf(bad, badsize, "%.*s", (int)(len > 64 ? 64 :
			    len), p);
			return -1;
		}
		if (comma == NULL)
			return 0;
		p = comma + 1;
	}
}
