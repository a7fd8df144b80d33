/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routes.h - zeusd's route table: every endpoint's path, method, API group,
 * the scope a token needs and its handler (handlers.h). The wiring hands it
 * to the server (http/ctx.h, `routes`); http looks paths up in it
 * (http/router.h) and names no handler itself.
 */
#ifndef ZEUS_ROUTES_H
#define ZEUS_ROUTES_H

#include "http/router.h"

/* The table; static, the same every call. */
const struct routes *api_routes(void);

#endif
