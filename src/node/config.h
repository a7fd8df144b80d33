/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - the parsed command line of `zeusd serve`.
 *
 * This is the only process-wide state besides the logger: cli.c fills it,
 * everything else reads it.
 */
#ifndef ZEUS_CONFIG_H
#define ZEUS_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "node/groups.h"

/* MODE_PIPE: a Windows named pipe (cli_os_win.c, http/pipe_win.c) */
enum transport_mode { MODE_UDS, MODE_TCP, MODE_PIPE };
enum gpu_backend_choice { GPU_BACKEND_AUTO, GPU_BACKEND_NVML, GPU_BACKEND_AMDSMI };

#define ZEUSD_DEFAULT_SOCKET "/run/zeusd/zeusd.sock"
#define ZEUSD_DEFAULT_TCP "127.0.0.1:4938"
/* upstream's: \\.\pipe\zeusd, read and write for Authenticated Users */
#define ZEUSD_DEFAULT_PIPE "\\\\.\\pipe\\zeusd"
#define ZEUSD_DEFAULT_PIPE_SDDL "D:(A;;GRGW;;;AU)"
#define ZEUSD_PIPE_PREFIX "\\\\.\\pipe\\"
#define ZEUSD_PIPE_NAME_MAX 256	/* Windows' limit, prefix included */

struct zeusd_config {
	enum transport_mode mode;
	const char *socket_path;
	unsigned socket_permissions;	/* 0..0777 */
	bool has_socket_uid, has_socket_gid;
	uid_t socket_uid;
	gid_t socket_gid;
	const char *tcp_bind_address;
	const char *tcp_allowed_hosts;	/* --tcp-allowed-hosts; NULL: none */
	const char *pipe_name;		/* --pipe-name (Windows) */
	const char *pipe_sddl;		/* --pipe-sddl (Windows) */
	unsigned num_workers;
	unsigned gpu_power_poll_hz;
	unsigned cpu_power_poll_hz;
	enum gpu_backend_choice gpu_backend;
	group_set enabled;
	const char *gpu_command_overrides;	/* NULL: none */
	const char *signing_key_path;		/* NULL: auth off */
	const char *policy_file;		/* NULL: no node policy */
	const char *audit_log;			/* NULL: no audit log */
	bool audit_required;			/* --audit-required */
	bool gpu_leases;			/* --gpu-leases */
	bool restore_on_shutdown;		/* --restore-on-shutdown */
	const char *state_dir;			/* --state-dir; NULL: none */
	const char *nvml_library;		/* NULL: the driver's */
	const char *rapl_dir;			/* NULL: default detection */
	bool simulate;
	const char *user;			/* --user; NULL: the default */
};

/* Fills defaults (docs/configuration.md's table). */
void config_defaults(struct zeusd_config *cfg);

#endif
