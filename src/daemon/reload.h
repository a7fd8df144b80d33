/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reload.h - SIGHUP: re-reading what can change without a restart.
 */
#ifndef ZEUS_RELOAD_H
#define ZEUS_RELOAD_H

struct zeusd_config;
struct server;
struct node;

/*
 * Re-reads the signing key (--signing-key-path) and the GPU command
 * overrides (--gpu-command-overrides) from the paths given at startup, and
 * logs what changed. Each file is judged alone: a bad one (unreadable,
 * empty, unsafe, invalid) leaves its old configuration in force with one
 * warn line naming the file and the reason, and the other may still be
 * taken. Everything else (flags, transport, groups, devices) needs a
 * restart. Runs on the main thread while requests are served. Returns the
 * number of files that failed to reload.
 */
int reload_run(const struct zeusd_config *cfg, struct server *srv,
    struct node *node);

#endif
