/* SPDX-License-Identifier: Apache-2.0 */
/*
 * network_proc.h - zeusd's network process (docs/design.md, "Two
 * processes"): it serves HTTP, confined and unprivileged, with a node whose
 * devices are the device process's. The device process starts it by fork
 * and exec of zeusd itself, as `zeusd --network-process ...` with its fds
 * by number (netstart.h); main.c hands that argv here.
 */
#ifndef ZEUS_NETWORK_PROC_H
#define ZEUS_NETWORK_PROC_H

/*
 * The network process's whole life; never returns. Refuses (exit 2, one
 * line on stderr) unless started by zeusd's device process with the fds of
 * netstart.h; exits 1 after a failure it logs, 0 after a stop by signal.
 */
_Noreturn void network_proc_main(int argc, char **argv);

#endif
