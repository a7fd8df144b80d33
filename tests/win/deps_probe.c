/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deps_probe.c - checks the static Windows builds of zeusd's four libraries
 * (scripts/win-deps.sh) together, under wine (tests/integration/
 * test_windows.py): libmicrohttpd serves HTTP on 127.0.0.1:<port>; every
 * answer is a JSON object built with jansson that carries an HMAC-SHA256
 * from nettle (RFC 4231-style check against a known vector, done by the
 * test) and whether pcre2 matched the request path against a pattern.
 * GET /quit answers and then stops the program (exit 0).
 *
 *   deps_probe.exe <port>
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <microhttpd.h>
#include <nettle/hmac.h>
#include <pcre2.h>
#include <windows.h>

static atomic_bool quit;
static pcre2_code *re;

static void
hmac_hex(const char *key, const char *msg, char out[2 * SHA256_DIGEST_SIZE + 1])
{
	struct hmac_sha256_ctx ctx;
	uint8_t d[SHA256_DIGEST_SIZE];

	hmac_sha256_set_key(&ctx, strlen(key), (const uint8_t *)key);
	hmac_sha256_update(&ctx, strlen(msg), (const uint8_t *)msg);
	hmac_sha256_digest(&ctx, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static enum MHD_Result
answer(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **state)
{
	char hex[2 * SHA256_DIGEST_SIZE + 1];
	pcre2_match_data *md;
	struct MHD_Response *r;
	enum MHD_Result ret;
	json_t *o;
	char *body;
	int m;

	hmac_hex("key", "The quick brown fox jumps over the lazy dog", hex);
	md = pcre2_match_data_create_from_pattern(re, NULL);
	m = pcre2_match(re, (PCRE2_SPTR)url, PCRE2_ZERO_TERMINATED, 0, 0, md,
	    NULL);
	pcre2_match_data_free(md);
	o = json_pack("{s:s, s:s, s:s, s:b, s:s}", "method", method,
	    "path", url, "hmac_sha256", hex, "gpu_path", m > 0,
	    "mhd", MHD_get_version());
	body = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	r = MHD_create_response_from_buffer(strlen(body), body,
	    MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	if (strcmp(url, "/quit") == 0)
		atomic_store(&quit, true);
	return ret;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sa = { 0 };
	struct MHD_Daemon *d;
	PCRE2_SIZE eoff;
	int ecode;

	if (argc != 2) {
		fprintf(stderr, "usage: deps_probe <port>\n");
		return 2;
	}
	re = pcre2_compile((PCRE2_SPTR)"^/gpu/[0-9]+/", PCRE2_ZERO_TERMINATED,
	    0, &ecode, &eoff, NULL);
	if (re == NULL)
		return 1;
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO,
	    0, NULL, NULL, answer, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "deps_probe: MHD_start_daemon failed\n");
		return 1;
	}
	printf("listening port=%s\n", argv[1]);
	fflush(stdout);
	while (!atomic_load(&quit))
		Sleep(20);
	Sleep(100);		/* let the last answer go out */
	MHD_stop_daemon(d);
	pcre2_code_free(re);
	return 0;
}
