/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reload.h - SIGHUP: re-reading what can change without a restart.
 */
#ifndef ZEUS_RELOAD_H
#define ZEUS_RELOAD_H

#include <stdbool.h>

#include <stddef.h>
#include <sys/types.h>

struct zeusd_config;
struct server;
struct node;

/*
 * SIGHUP re-reads the signing key (--signing-key-path), the GPU command
 * overrides (--gpu-command-overrides) and the node policy (--policy-file)
 * from the paths given at startup, reopens the audit log, and logs what
 * changed. Each file is judged alone: a bad one (unreadable, empty, unsafe,
 * invalid) leaves its old configuration in force with one warn line naming
 * the file and the reason, and the other may still be taken. Everything
 * else (flags, transport, groups, devices) needs a restart.
 *
 * The reload is split between the two processes (docs/design.md, "Two
 * processes"). The device process reloads the overrides and opens the
 * files the network process cannot: fds[] gets the key file, the policy
 * and a new audit-log fd (-1 for each not configured or failed, logged);
 * returns its failures. The policy is loaded and checked here (its names
 * need NSS, which the network process lacks) and passed as a sealed memfd
 * holding policy_format_numeric's text. The network process then applies
 * the files from those fds, takes the audit fd, and returns its failures.
 * Key and policy fds stay the caller's to close. `policy` (the device
 * process's own, for access/warden.h; may be NULL) gets the new policy,
 * and the device process's own audit log is reopened too. The signing key
 * is reloaded here into `key` (the device process's, which it alone
 * holds: no fd goes to the network process, fds[RELOAD_FD_KEY] is -1);
 * *key_changed says whether its bytes changed, and reload_network's
 * `key_changed` then voids the network process's kept token verdicts.
 */
enum { RELOAD_FD_KEY, RELOAD_FD_POLICY, RELOAD_FD_AUDIT, RELOAD_NFDS };

struct policy_holder;
struct auth_key;
int reload_device(const struct zeusd_config *cfg, struct node *node,
    struct policy_holder *policy, struct auth_key *key, bool *key_changed,
    int fds[RELOAD_NFDS]);
int reload_network(const struct zeusd_config *cfg, struct server *srv,
    const int fds[RELOAD_NFDS], bool key_changed);

/*
 * Writes all of buf to a fresh memfd, seals it and rewinds it; -1 (errno)
 * if not. How the device process hands text to the network process.
 */
int reload_memfd(const char *name, const char *buf, size_t len);

#endif
