/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease_json.h - decoding of zeusd's energy ledger answers (GET
 * /gpu/leases, POST /gpu/release) into the public structs of client.h.
 * Pure functions of a parsed JSON value, so the unit tests reach every
 * shape without a daemon; client.c runs the requests.
 */
#ifndef ZEUS_LIB_LEASE_JSON_H
#define ZEUS_LIB_LEASE_JSON_H

#include <jansson.h>

#include "zeus/client.h"

/* One record ({gpu, uid, user, ...}); 0, or -1 when its shape is wrong. */
int lease_json_record(json_t *v, struct zeus_lease *out);

/* {"leases": [...], "ended": [...], "unleased": [...]}; 0 or -1. */
int lease_json_leases(json_t *j, struct zeus_leases *out);

/* {"released": [...], "not_leased": [ids]}; 0 or -1. */
int lease_json_release(json_t *j, struct zeus_release *out);

#endif
