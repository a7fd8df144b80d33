/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handlers_util.h - pieces every device handler shares: query parsing that
 * answers 400 itself, id validation against the devices present, and the
 * per-device error aggregation of docs/api.md ({"errors": {...}} with the
 * worst status).
 */
#ifndef ZEUS_HANDLERS_UTIL_H
#define ZEUS_HANDLERS_UTIL_H

#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "http/query.h"

struct request;

/* query_parse on the request's query; answers 400 and returns -1 on error. */
int handlers_parse(struct request *req, const struct query_spec *spec,
    struct query_values *qv);

/*
 * The devices a request names: `v` is the optional gpu_ids / cpu_ids list
 * of API ids (absent: every device). On success `out` holds device indices
 * (GPU index, or index into the RAPL set) in ascending id order; an unknown
 * id answers 400 naming it and the available ones, and returns -1.
 */
int handlers_pick_gpus(struct request *req, const struct query_value *v,
    struct id_list *out);
int handlers_pick_cpus(struct request *req, const struct query_value *v,
    struct id_list *out);

/*
 * Refuses a GPU operation that the driver lacks an entry point for
 * (`lacks`, from gpu_backend_ops.read_lacks / write_lacks; NULL: it has
 * it): answers 400 for the whole request, before anything is queued, and
 * returns -1. Returns 0 when `lacks` is NULL.
 */
int handlers_gpu_lacks(struct request *req, const char *op,
    const char *lacks);

struct handlers_errors {
	json_t *map;
	unsigned worst;
};

void handlers_errors_init(struct handlers_errors *agg);
void handlers_errors_add(struct handlers_errors *agg, uint32_t id,
    const struct zerr *err);
/* Answers and returns 1 when any error was added; else 0 (frees either way). */
int handlers_errors_reply(struct request *req, struct handlers_errors *agg);

/* Answers 500 "out of memory". */
void handlers_reply_oom(struct request *req);

/* Unix time in milliseconds. */
int64_t handlers_now_ms(void);

#endif
