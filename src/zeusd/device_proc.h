/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device_proc.h - zeusd's device process (docs/design.md, "Two
 * processes"): the process `zeusd serve` starts, the PID systemd knows. It
 * keeps root, the real GPU backend, RAPL and the override runner; starts
 * the network process (fork + exec of zeusd, netstart.h) and the janitor;
 * answers the network process's device requests, decides every write
 * (access/warden.h), handles the signals, passes systemd notifications on,
 * reloads on SIGHUP, and removes the socket at the end.
 */
#ifndef ZEUS_DEVICE_PROC_H
#define ZEUS_DEVICE_PROC_H

#include "node/config.h"

/*
 * The exit status after a clean stop on SIGUSR2, a restart (EX_TEMPFAIL
 * of sysexits.h): the systemd unit restarts zeusd on it
 * (RestartForceExitStatus=75), and with a lease journal the next zeusd
 * takes the leases back, their GPUs never restored in between.
 */
#define ZEUSD_EXIT_RESTART 75

/*
 * The device process's whole life, from the end of flag parsing (main.c):
 * argv[0..argc-1] are `zeusd serve`'s arguments from "serve" on, passed
 * again to the network process. Returns the exit status: 0 after a clean
 * stop on SIGTERM or SIGINT, ZEUSD_EXIT_RESTART after one on SIGUSR2; 1
 * with one line on stderr when startup fails; a device command stuck at
 * the stop ends the process (exit 1) without closing the devices.
 */
int device_proc_main(struct zeusd_config *cfg, int argc, char **argv);

#endif
