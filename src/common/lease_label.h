/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_label.h - the label a client gives its GPU lease (request header
 * X-Zeus-Lease-Label, docs/api.md): 1 to LEASE_LABEL_MAX bytes of
 * letters, digits and . _ : @ + / - (so "slurm:42.0" or "alice/train-3"),
 * nothing else. Checked by zeusd on every write that carries one and by
 * libzeus before it sends one. Never a /metrics label.
 */
#ifndef ZEUS_LEASE_LABEL_H
#define ZEUS_LEASE_LABEL_H

#include <stddef.h>

#define LEASE_LABEL_MAX 64
#define LEASE_LABEL_HEADER "X-Zeus-Lease-Label"

/*
 * NULL when `s` is a valid label, else why not (a static string that
 * names the rule, for a 400's message). Reads at most LEASE_LABEL_MAX + 1
 * bytes of `s`.
 */
const char *lease_label_invalid(const char *s);

#endif
