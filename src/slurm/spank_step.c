/* SPDX-License-Identifier: Apache-2.0 */
/* spank_step.c - telling zeusd a job step's GPUs (spank_step.h). */
#include "slurm/spank_step.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define STEP_ANSWER_MAX 2048		/* what is read of the answer */

int
spank_step_target(char *buf, size_t size, bool start, uint32_t job,
    uint32_t step, uid_t uid, const unsigned *ids, size_t n)
{
	size_t len;
	int k;

	if (start && n == 0)
		return -1;
	k = snprintf(buf, size, start ? "/slurm/step_start?job=%u&step=%u&"
	    "uid=%u&gpu_ids=" : "/slurm/step_end?job=%u&step=%u", job, step,
	    (unsigned)uid);
	if (k < 0 || (size_t)k >= size)
		return -1;
	len = (size_t)k;
	for (size_t i = 0; start && i < n; i++) {
		k = snprintf(buf + len, size - len, "%s%u", i ? "," : "",
		    ids[i]);
		if (k < 0 || (size_t)k >= size - len)
			return -1;
		len += (size_t)k;
	}
	return 0;
}

int
spank_step_answer(const char *buf, size_t len, unsigned *status, char *why,
    size_t why_size)
{
	const char *body = NULL;
	size_t o = 0;

	*status = 0;
	if (why_size > 0)
		why[0] = '\0';
	if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ' ||
	    buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' ||
	    buf[11] < '0' || buf[11] > '9')
		return -1;
	*status = (unsigned)(buf[9] - '0') * 100 +
	    (unsigned)(buf[10] - '0') * 10 + (unsigned)(buf[11] - '0');
	for (size_t i = 0; i + 3 < len; i++)
		if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
			body = buf + i + 4;
			break;
		}
	for (size_t i = 0; body != NULL && body + i < buf + len &&
	    o + 1 < why_size; i++) {
		unsigned char c = (unsigned char)body[i];

		why[o++] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
	}
	if (why_size > 0)
		why[o] = '\0';
	return 0;
}

static long
step_ms_left(const struct timespec *until)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (until->tv_sec - now.tv_sec) * 1000 +
	    (until->tv_nsec - now.tv_nsec) / 1000000;
}

/* Waits for `events` on fd until `until`; 0, or -1 (timed out, error). */
static int
step_wait(int fd, short events, const struct timespec *until)
{
	struct pollfd p = { .fd = fd, .events = events };
	long left;
	int rc;

	do {
		if ((left = step_ms_left(until)) <= 0)
			return -1;
		rc = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
	} while (rc < 0 && errno == EINTR);
	return rc > 0 ? 0 : -1;
}

enum spank_step_result
spank_step_tell(const char *socket_path, const char *target,
    unsigned timeout_ms, char *why, size_t why_size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char req[SPANK_STEP_TARGET_MAX + 128], ans[STEP_ANSWER_MAX], body[400];
	struct timespec until;
	size_t len = 0, off = 0;
	unsigned status;
	int fd, k;

	snprintf(why, why_size, "no answer");
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	if (strlen(socket_path) >= sizeof(sa.sun_path))
		return SPANK_STEP_NO_ZEUSD;
	memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
	k = snprintf(req, sizeof(req), "POST %s HTTP/1.1\r\nHost: zeusd\r\n"
	    "Content-Length: 0\r\nConnection: close\r\n\r\n", target);
	if (k < 0 || (size_t)k >= sizeof(req)) {
		snprintf(why, why_size, "request too long");
		return SPANK_STEP_REFUSED;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(why, why_size, "socket: %s", strerror(errno));
		return SPANK_STEP_REFUSED;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
	    (errno != EINPROGRESS && errno != EAGAIN)) {
		int e = errno;

		close(fd);
		if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR)
			return SPANK_STEP_NO_ZEUSD;
		snprintf(why, why_size, "connect: %s", strerror(e));
		return SPANK_STEP_REFUSED;
	}
	while (off < (size_t)k) {
		ssize_t n;

		if (step_wait(fd, POLLOUT, &until) != 0)
			goto timeout;
		n = send(fd, req + off, (size_t)k - off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			snprintf(why, why_size, "send: %s", strerror(errno));
			close(fd);
			return SPANK_STEP_REFUSED;
		}
		off += (size_t)n;
	}
	while (len < sizeof(ans)) {
		ssize_t n;

		if (step_wait(fd, POLLIN, &until) != 0)
			goto timeout;
		n = recv(fd, ans + len, sizeof(ans) - len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;		/* zeusd closed: the whole answer */
		len += (size_t)n;
	}
	close(fd);
	if (spank_step_answer(ans, len, &status, body, sizeof(body)) != 0) {
		snprintf(why, why_size, "not an HTTP answer");
		return SPANK_STEP_REFUSED;
	}
	if (status == 200)
		return SPANK_STEP_DONE;
	if (status == 404)
		return SPANK_STEP_NO_ZEUSD;
	snprintf(why, why_size, "HTTP %u %s", status, body);
	return SPANK_STEP_REFUSED;
timeout:
	close(fd);
	snprintf(why, why_size, "no answer within %u ms", timeout_ms);
	return SPANK_STEP_REFUSED;
}
