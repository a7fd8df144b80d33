/* SPDX-License-Identifier: Apache-2.0 */
/*
 * zeus.h - libzeus, Zeus's measurement and metrics layer for C and C++.
 *
 * Include this one header. It pulls in:
 *   client.h   the zeusd client (discover, reads, writes, SSE streams)
 *   monitor.h  named, nestable energy windows over GPUs, CPUs and DRAM
 *   metric.h   energy histogram, cumulative energy counter, power gauge,
 *              pushed to a Prometheus Pushgateway
 * and declares what they share: the error type, the log hook and limits.
 * See docs/libzeus.md.
 */
#ifndef ZEUS_ZEUS_H
#define ZEUS_ZEUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* zeus.dll exports exactly these (the Windows build defines
 * ZEUS_BUILD_DLL while compiling it); elsewhere hidden visibility does. */
#if defined(_WIN32) && defined(ZEUS_BUILD_DLL)
#define ZEUS_API __declspec(dllexport)
#elif defined(__GNUC__) && !defined(_WIN32)
#define ZEUS_API __attribute__((visibility("default")))
#else
#define ZEUS_API
#endif

/* Most devices of one kind a monitor, reading or stream handles. */
#define ZEUS_MAX_DEVICES 64

/* Longest window name, job name or label value accepted (bytes). */
#define ZEUS_NAME_MAX 256

enum zeus_errc {
	ZEUS_OK = 0,
	ZEUS_ERR_INVALID,	/* bad argument or misuse (window not open...) */
	ZEUS_ERR_NOT_FOUND,	/* no such device, no NVML, no zeusd */
	ZEUS_ERR_DEVICE,	/* a driver or sysfs read failed */
	ZEUS_ERR_TRANSPORT,	/* could not talk to zeusd (connect, timeout) */
	ZEUS_ERR_HTTP,		/* zeusd answered an error; see http_status */
	ZEUS_ERR_PUSH,		/* Pushgateway push failed; data is kept */
	ZEUS_ERR_NOMEM,
	ZEUS_ERR_INTERNAL,
};

#define ZEUS_ERR_MSG_MAX 1024

/*
 * Every fallible call returns 0 or -1 and, on -1, fills the caller's
 * `struct zeus_error` (which may be NULL when the caller does not care).
 * For ZEUS_ERR_HTTP, `message` is the daemon's own message (for per-device
 * errors, "gpu 1: <msg>; gpu 2: <msg>") and `http_status` its status.
 */
struct zeus_error {
	enum zeus_errc code;
	long http_status;	/* 0 unless an HTTP answer was received */
	char message[ZEUS_ERR_MSG_MAX];
};

/* Short name of a code ("invalid", "http", "push", ...). */
ZEUS_API const char *zeus_errc_name(enum zeus_errc code);

enum zeus_log_level { ZEUS_LOG_DEBUG, ZEUS_LOG_INFO, ZEUS_LOG_WARN,
	ZEUS_LOG_ERROR };

/*
 * Where everything libzeus logs goes: warnings (a value outside the
 * histogram buckets, a failed push in a background thread, a device
 * warning), and at info and debug level what the device code reports
 * ("nvml_open library=... gpus=4", why no GPU or CPU was found). The
 * default writes "zeus: warning: <msg>" to stderr for WARN and ERROR and
 * drops the rest; a handler gets every level. Pass NULL to restore the
 * default. Process-wide; may be called from any thread, and the handler may
 * be called from libzeus's background threads.
 */
typedef void (*zeus_log_fn)(enum zeus_log_level level, const char *message,
    void *user);
ZEUS_API void zeus_set_log_handler(zeus_log_fn fn, void *user);

/* "0.1.0" */
ZEUS_API const char *zeus_version(void);

#ifdef __cplusplus
}
#endif

#include "client.h"
#include "monitor.h"
#include "metric.h"

#endif
