/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c - one HTTP request through libcurl, for the zeusd client (UDS or
 * TCP, bearer token, SSE streams) and the Pushgateway pusher.
 *
 * Callers keep a CURL handle per connection they want reused; this file
 * resets its options on every request so nothing leaks from one request
 * into the next. Response bodies are bounded (4 MiB); a stream's body is
 * handed to the caller's chunk function instead and is unbounded.
 */
#include "lib.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/lease_label.h"
#include "os.h"

#define HTTP_BODY_MAX (4u << 20)
#define HTTP_CONNECT_TIMEOUT_MS 3000L

static pthread_once_t http_once = PTHREAD_ONCE_INIT;
static CURLcode http_init_rc;

static void
http_init_once(void)
{
	http_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int
http_global_init(struct zeus_error *err)
{
	pthread_once(&http_once, http_init_once);
	if (http_init_rc != CURLE_OK)
		return lib_err(err, ZEUS_ERR_INTERNAL, "curl_global_init: %s",
		    curl_easy_strerror(http_init_rc));
	return 0;
}

struct http_sink {
	const struct http_request *rq;
	struct http_response *resp;
	int stopped;		/* the chunk function asked to stop */
};

static size_t
http_write(char *p, size_t size, size_t nmemb, void *arg)
{
	struct http_sink *s = arg;
	size_t n = size * nmemb;

	if (s->rq->on_chunk != NULL) {
		if (s->rq->on_chunk(p, n, s->rq->user) != 0) {
			s->stopped = 1;
			return 0;	/* makes curl abort the transfer */
		}
		return n;
	}
	if (zbuf_append(&s->resp->body, p, n) != 0)
		return 0;
	return n;
}

static int
http_progress(void *arg, curl_off_t dlt, curl_off_t dln, curl_off_t ult,
    curl_off_t uln)
{
	struct http_sink *s = arg;

	if (s->rq->stop != NULL && __atomic_load_n(s->rq->stop,
	    __ATOMIC_ACQUIRE)) {
		s->stopped = 1;
		return 1;
	}
	return 0;
}

/* Appends "name: value"; on failure frees the whole list, returns NULL. */
static struct curl_slist *
http_header_add(struct curl_slist *h, const char *name, const char *value)
{
	char line[ZEUS_ERR_MSG_MAX * 4 + 64];
	struct curl_slist *t = NULL;
	int n = snprintf(line, sizeof(line), "%s: %s", name, value);

	if (n >= 0 && (size_t)n < sizeof(line))	/* never cut a header */
		t = curl_slist_append(h, line);
	if (t == NULL)
		curl_slist_free_all(h);
	return t;
}

static struct curl_slist *
http_headers(const struct http_request *rq, struct zeus_error *err)
{
	struct curl_slist *h = NULL;
	char line[ZEUS_ERR_MSG_MAX * 4];

	/* curl adds "Expect: 100-continue" for bodies; the gateway needs none. */
	h = curl_slist_append(h, "Expect:");
	if (h != NULL && rq->bearer != NULL) {
		if (strpbrk(rq->bearer, "\r\n") != NULL ||
		    strlen(rq->bearer) > sizeof(line) - 32) {
			curl_slist_free_all(h);
			lib_err(err, ZEUS_ERR_INVALID,
			    "token has a line break or is too long");
			return NULL;
		}
		snprintf(line, sizeof(line), "Bearer %s", rq->bearer);
		h = http_header_add(h, "Authorization", line);
	}
	if (h != NULL && rq->lease_label != NULL)
		h = http_header_add(h, LEASE_LABEL_HEADER, rq->lease_label);
	if (h != NULL && rq->content_type != NULL)
		h = http_header_add(h, "Content-Type", rq->content_type);
	if (h == NULL)
		lib_err(err, ZEUS_ERR_NOMEM, "out of memory for headers");
	return h;
}

/*
 * Every connection is opened close-on-exec. A program that runs commands
 * (zeus measure) would otherwise hand them its kept-alive connection to
 * zeusd, which knows a Unix-socket peer by the credentials of whoever
 * connected: a command that drops privileges could then act as the
 * program's user (root) on it.
 */
static curl_socket_t
http_open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	const struct http_request *rq = arg;

	(void)purpose;
	if (rq->pipe_name != NULL)	/* a Windows named pipe (os.h) */
		return lib_os_pipe_socket(rq->pipe_name, rq->connect_timeout_ms ?
		    rq->connect_timeout_ms : HTTP_CONNECT_TIMEOUT_MS, &a->addr,
		    &a->addrlen);
	return lib_os_socket(a->family, a->socktype, a->protocol);
}

static void
http_setup(CURL *c, const struct http_request *rq, struct http_sink *sink,
    struct curl_slist *hdrs, struct curl_slist *resolve)
{
	curl_easy_setopt(c, CURLOPT_URL, rq->url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, http_open_socket);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, (void *)rq);
	/* a pipe's URL host is not looked up: the socket is the pipe's */
	if (resolve != NULL)
		curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
	    rq->connect_timeout_ms ? rq->connect_timeout_ms :
	    HTTP_CONNECT_TIMEOUT_MS);
	if (rq->unix_socket != NULL)
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, rq->unix_socket);
	if (rq->no_proxy)	/* "": no proxy, whatever the environment says */
		curl_easy_setopt(c, CURLOPT_PROXY, "");
	if (rq->stop != NULL) {
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, http_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, sink);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	}
	if (strcmp(rq->method, "GET") == 0) {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS,
		    rq->body != NULL ? rq->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)(rq->body != NULL ? rq->body_len : 0));
		if (strcmp(rq->method, "POST") != 0)
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
	}
}

void
http_url_shown(const char *url, char *out, size_t size)
{
	const char *auth = strstr(url, "://"), *end, *at = NULL;

	if (auth != NULL) {
		auth += 3;
		end = auth + strcspn(auth, "/?#");
		for (const char *p = auth; p < end; p++)
			if (*p == '@')
				at = p;
	}
	if (at == NULL)
		snprintf(out, size, "%s", url);
	else
		snprintf(out, size, "%.*s***%s", (int)(auth - url), url, at);
}

int
http_perform(void *handle, const struct http_request *rq,
    struct http_response *resp, struct zeus_error *err)
{
	CURL *c = handle;
	struct http_sink sink = { rq, resp, 0 };
	struct curl_slist *hdrs, *resolve = NULL;
	CURLcode rc;
	int owned = c == NULL;

	if (http_global_init(err) != 0)
		return -1;
	if (resp->body.limit == 0)
		zbuf_init(&resp->body, HTTP_BODY_MAX);
	resp->status = 0;
	if (owned && (c = curl_easy_init()) == NULL)
		return lib_err(err, ZEUS_ERR_NOMEM, "curl_easy_init failed");
	curl_easy_reset(c);
	hdrs = http_headers(rq, err);
	if (hdrs == NULL) {
		if (owned)
			curl_easy_cleanup(c);
		return -1;
	}
	if (rq->pipe_name != NULL &&
	    (resolve = curl_slist_append(NULL, "zeusd:80:127.0.0.1")) == NULL) {
		curl_slist_free_all(hdrs);
		if (owned)
			curl_easy_cleanup(c);
		return lib_err(err, ZEUS_ERR_NOMEM, "out of memory");
	}
	http_setup(c, rq, &sink, hdrs, resolve);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_RESOLVE, NULL);
	curl_slist_free_all(hdrs);
	curl_slist_free_all(resolve);
	if (owned)
		curl_easy_cleanup(c);
	if (sink.stopped)
		return 0;
	if (rc != CURLE_OK) {
		const char *via = rq->unix_socket != NULL ? rq->unix_socket :
		    rq->pipe_name;
		char url[ZEUS_ERR_MSG_MAX];

		http_url_shown(rq->url, url, sizeof(url));
		if (rc == CURLE_WRITE_ERROR && resp->body.failed)
			return lib_err(err, ZEUS_ERR_TRANSPORT,
			    "%s %s: response larger than %u bytes",
			    rq->method, url, HTTP_BODY_MAX);
		return lib_err(err, ZEUS_ERR_TRANSPORT, "%s %s%s%s: %s",
		    rq->method, url, via != NULL ? " via " : "",
		    via != NULL ? via : "", curl_easy_strerror(rc));
	}
	return 0;
}

int
http_escape(struct zbuf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
		    ch == '.' || ch == '~') {
			if (zbuf_append(b, s, 1) != 0)
				return -1;
		} else {
			char e[3] = { '%', hex[ch >> 4], hex[ch & 15] };

			if (zbuf_append(b, e, 3) != 0)
				return -1;
		}
	}
	return 0;
}
