/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reply_share.h - one answer for the requests that merged reads answered
 * alike.
 *
 * Requests that joined the same device reads (docs/design.md, "Reads
 * merge") finish one after the other on the server's thread with the same
 * values, so they would encode the same JSON body each: at 50 connections
 * polling GET /gpu/get_power, encoding and the response object were a third
 * of the network process's CPU per request. A finish function instead
 * describes every input of its body as a key (reply_key: a kind, then
 * numbers); the first request with a key encodes the body and the server
 * keeps that response, and the next request with the same key, with no
 * other shared answer in between, is answered with the kept response
 * (libmicrohttpd counts its references). Equal keys make equal bodies by
 * construction, so sharing is invisible to clients; only one response is
 * kept at a time, for one server (each server's requests finish on one
 * thread).
 */
#ifndef ZEUS_REPLY_SHARE_H
#define ZEUS_REPLY_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jsonw;
struct request;

/* Room for 31 GPUs' power readings; a longer key shares nothing. */
#define REPLY_KEY_MAX 512

/* Kinds of body (the key's first number). */
enum reply_kind {
	REPLY_GPU_POWER = 1,
	REPLY_CPU_ENERGY,
};

struct reply_key {
	size_t len;
	bool over;		/* did not fit: the answer is not shared */
	unsigned char b[REPLY_KEY_MAX];
};

void reply_key_init(struct reply_key *k, enum reply_kind kind);
void reply_key_add(struct reply_key *k, uint64_t v);

/*
 * Answers 200 with the kept response when the last shared answer had the
 * same key (true); false: nothing done, build the body and call
 * reply_share_keep.
 */
bool reply_share_try(struct request *req, const struct reply_key *k);

/*
 * Answers 200 with the body written in `w` (common/jsonw.h; finished here)
 * and keeps the response for `k`.
 */
void reply_share_keep(struct request *req, const struct reply_key *k,
    struct jsonw *w);

struct reply_share;

/* Lets go of the kept response (server stop); NULL is fine. */
void reply_share_free(struct reply_share *s);

#endif
