/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token.c - `zeusd token issue` and `zeusd token verify` (see token.h).
 *
 * An offline tool: it reads the same key file the daemon uses and calls the
 * same auth_sign / auth_verify, so a token it issues is exactly what the
 * daemon accepts. `verify` reads the token from stdin rather than argv so
 * tokens do not end up in shell history or `ps` output.
 */
#include "zeusd/token.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/duration.h"
#include "common/err.h"
#include "access/auth.h"
#include "node/groups.h"

/* 9999-12-31T23:59:59Z: later expiries break common JWT libraries' dates. */
#define TOKEN_EXP_MAX INT64_C(253402300799)

static const char token_usage[] =
    "Usage: zeusd token <command> [options]\n"
    "\n"
    "Issue or check the JWTs that zeusd accepts when it runs with\n"
    "--signing-key-path.\n"
    "\n"
    "Commands:\n"
    "  issue    print a new HS256 token signed with the key file\n"
    "  verify   check a token read from stdin and print its claims as JSON\n"
    "\n"
    "Run 'zeusd token <command> --help' for a command's options.\n";

static const char token_issue_usage[] =
    "Usage: zeusd token issue --signing-key-path FILE --user NAME\n"
    "                         --scope LIST --expires DUR\n"
    "\n"
    "Prints one HS256 JWT and a newline on stdout.\n"
    "\n"
    "  --signing-key-path FILE  key file; its bytes exactly as read are the\n"
    "                           key (a trailing newline is part of it)\n"
    "  --user NAME              the token's subject (sub), 1-256 bytes\n"
    "  --scope LIST             comma-separated API groups: gpu-control,\n"
    "                           gpu-read, cpu-read, metrics; '' for no\n"
    "                           scopes (the token then only passes\n"
    "                           /auth/whoami)\n"
    "  --expires DUR            lifetime: 90m, 1h, 7d, 1h 30m, ... (units s,\n"
    "                           m, h, d, w), or 'never' / '0' for no expiry\n"
    "  -h, --help               this text\n"
    "\n"
    "Exit status: 0 ok, 1 runtime error, 2 usage error.\n";

static const char token_verify_usage[] =
    "Usage: zeusd token verify --signing-key-path FILE < token\n"
    "\n"
    "Reads one token from stdin and checks it as the daemon would (HS256,\n"
    "signature, exp/nbf with 60 s leeway, sub, scopes). Prints the claims as\n"
    "JSON ({\"sub\", \"scopes\", \"exp\"}) and exits 0, or prints the reason\n"
    "on stderr and exits 1.\n"
    "\n"
    "  --signing-key-path FILE  key file\n"
    "  -h, --help               this text\n"
    "\n"
    "Exit status: 0 valid, 1 invalid token or runtime error, 2 usage error.\n";

struct token_issue_opts {
	const char *key_path;
	const char *user;
	const char *scope;
	const char *expires;
};

/* Values index token_long_opts: OPT_KEY is entry 0, and so on. */
enum { OPT_KEY = 1, OPT_USER, OPT_SCOPE, OPT_EXPIRES };

static const struct option token_long_opts[] = {
	{ "signing-key-path", required_argument, NULL, OPT_KEY },
	{ "user", required_argument, NULL, OPT_USER },
	{ "scope", required_argument, NULL, OPT_SCOPE },
	{ "expires", required_argument, NULL, OPT_EXPIRES },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int
token_usage_error(const char *cmd, const char *what, const char *detail)
{
	fprintf(stderr, "zeusd token%s%s: %s%s (see 'zeusd token%s%s --help')\n",
	    cmd ? " " : "", cmd ? cmd : "", what, detail ? detail : "",
	    cmd ? " " : "", cmd ? cmd : "");
	return TOKEN_EXIT_USAGE;
}

static int
token_runtime_error(const char *cmd, const char *msg)
{
	fprintf(stderr, "zeusd token %s: %s\n", cmd, msg);
	return TOKEN_EXIT_RUNTIME;
}

/* Names the option getopt just refused, for the one-line error. */
static void
token_bad_option(char **argv, char *buf, size_t size)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";

	/* Long options report their `val` in optopt, short ones the letter. */
	if (optopt > OPT_EXPIRES)
		snprintf(buf, size, "'-%c'", optopt);
	else
		snprintf(buf, size, "'%.64s'", arg);
}

/*
 * Parses the options of `issue` or `verify` (which only knows the key path).
 * Returns -1 to continue, else an exit status.
 */
static int
token_parse_opts(const char *cmd, const char *usage, bool issue, int argc,
    char **argv, struct token_issue_opts *o)
{
	char bad[80];
	int c;

	optind = 0;	/* glibc: full re-initialisation; main may have used getopt */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", token_long_opts, NULL)) != -1) {
		const char **slot = NULL;

		switch (c) {
		case 'h':
			fputs(usage, stdout);
			return TOKEN_EXIT_OK;
		case OPT_KEY:
			slot = &o->key_path;
			break;
		case OPT_USER:
			slot = issue ? &o->user : NULL;
			break;
		case OPT_SCOPE:
			slot = issue ? &o->scope : NULL;
			break;
		case OPT_EXPIRES:
			slot = issue ? &o->expires : NULL;
			break;
		case ':':
			token_bad_option(argv, bad, sizeof(bad));
			return token_usage_error(cmd, "missing value for ", bad);
		default:
			token_bad_option(argv, bad, sizeof(bad));
			return token_usage_error(cmd, "unknown option ", bad);
		}
		if (slot == NULL || *slot != NULL) {
			snprintf(bad, sizeof(bad), "--%s",
			    token_long_opts[c - OPT_KEY].name);
			return token_usage_error(cmd, slot == NULL ?
			    "unknown option " : "option given twice: ", bad);
		}
		*slot = optarg;
	}
	if (optind < argc) {
		snprintf(bad, sizeof(bad), "'%.64s'", argv[optind]);
		return token_usage_error(cmd, "unexpected argument ", bad);
	}
	return -1;
}

/* Turns --expires into (has_exp, exp); returns -1 or an exit status. */
static int
token_expiry(const char *text, bool *has_exp, int64_t *exp)
{
	struct zerr err;
	int64_t secs, now = (int64_t)time(NULL);

	if (duration_parse(text, &secs, &err) != 0)
		return token_usage_error("issue", "--expires: ", err.msg);
	*has_exp = secs != 0;
	if (secs == 0)
		return -1;
	if (secs > TOKEN_EXP_MAX - now)
		return token_usage_error("issue", "--expires: ",
		    "too far in the future (use 'never' for no expiry)");
	*exp = now + secs;
	return -1;
}

static int
token_scopes(const char *text, group_set *scopes)
{
	char bad[80];

	*scopes = 0;
	/* An empty (or all-blank) list is allowed: a scope-less token. */
	if (text[strspn(text, " ")] == '\0')
		return -1;
	if (group_parse_list(text, scopes, bad, sizeof(bad)) != 0) {
		char msg[200];

		snprintf(msg, sizeof(msg), "unknown scope '%s' (known: "
		    "gpu-control, gpu-read, cpu-read, metrics)", bad);
		return token_usage_error("issue", "--scope: ", msg);
	}
	return -1;
}

static int
token_issue(int argc, char **argv)
{
	struct token_issue_opts o = { 0 };
	struct auth_key *key = NULL;
	struct zerr err;
	group_set scopes;
	bool has_exp = false;
	int64_t exp = 0;
	char *tok = NULL;
	int rc;

	rc = token_parse_opts("issue", token_issue_usage, true, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (o.key_path == NULL || o.user == NULL || o.scope == NULL ||
	    o.expires == NULL)
		return token_usage_error("issue", "missing required option ",
		    o.key_path == NULL ? "--signing-key-path" :
		    o.user == NULL ? "--user" :
		    o.scope == NULL ? "--scope" : "--expires");
	if (auth_check_sub(o.user, strlen(o.user), &err) != 0)
		return token_usage_error("issue", "--user: ", err.msg);
	if ((rc = token_scopes(o.scope, &scopes)) >= 0 ||
	    (rc = token_expiry(o.expires, &has_exp, &exp)) >= 0)
		return rc;

	if (auth_key_load(o.key_path, &key, &err) != 0)
		return token_runtime_error("issue", err.msg);
	rc = auth_sign(key, o.user, scopes, has_exp, exp, &tok, &err);
	auth_key_free(key);
	if (rc != 0)
		return token_runtime_error("issue", err.msg);
	printf("%s\n", tok);
	free(tok);
	if (fflush(stdout) != 0 || ferror(stdout))
		return token_runtime_error("issue", "cannot write to stdout");
	return TOKEN_EXIT_OK;
}

static bool
token_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Reads stdin (bounded) and trims surrounding whitespace into buf. */
static int
token_read_stdin(char *buf, size_t size, size_t *len)
{
	size_t got = 0, start = 0;

	while (got < size) {
		size_t n = fread(buf + got, 1, size - got, stdin);

		if (n == 0)
			break;
		got += n;
	}
	if (ferror(stdin))
		return -1;
	if (got == size) /* did not reach EOF within the bound */
		return -2;
	while (got > 0 && token_is_space(buf[got - 1]))
		got--;
	while (start < got && token_is_space(buf[start]))
		start++;
	memmove(buf, buf + start, got - start);
	*len = got - start;
	return 0;
}

static int
token_verify(int argc, char **argv)
{
	struct token_issue_opts o = { 0 };
	/* Room for a maximal token plus generous surrounding whitespace. */
	char buf[AUTH_TOKEN_MAX + 256];
	struct auth_key *key = NULL;
	struct auth_claims claims;
	struct zerr err;
	size_t len;
	char *json;
	int rc;

	rc = token_parse_opts("verify", token_verify_usage, false, argc, argv,
	    &o);
	if (rc >= 0)
		return rc;
	if (o.key_path == NULL)
		return token_usage_error("verify", "missing required option ",
		    "--signing-key-path");
	if (auth_key_load(o.key_path, &key, &err) != 0)
		return token_runtime_error("verify", err.msg);
	rc = token_read_stdin(buf, sizeof(buf), &len);
	if (rc == 0)
		rc = auth_verify(key, buf, len, time(NULL), &claims, &err);
	else
		zerr_set(&err, ZERR_UNAUTHENTICATED, rc == -2 ?
		    "Token is too large." : "cannot read stdin");
	auth_key_free(key);
	if (rc != 0)
		return token_runtime_error("verify", err.msg);
	json = auth_claims_json(&claims);
	if (json == NULL)
		return token_runtime_error("verify", "out of memory");
	printf("%s\n", json);
	free(json);
	if (fflush(stdout) != 0 || ferror(stdout))
		return token_runtime_error("verify", "cannot write to stdout");
	return TOKEN_EXIT_OK;
}

int
token_main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (cmd == NULL) {
		fputs(token_usage, stderr);
		return TOKEN_EXIT_USAGE;
	}
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
	    strcmp(cmd, "help") == 0) {
		fputs(token_usage, stdout);
		return TOKEN_EXIT_OK;
	}
	/* Sub-commands see argv[0] == their own name, as getopt expects. */
	if (strcmp(cmd, "issue") == 0)
		return token_issue(argc - 1, argv + 1);
	if (strcmp(cmd, "verify") == 0)
		return token_verify(argc - 1, argv + 1);
	{
		char bad[80];

		snprintf(bad, sizeof(bad), "'%.64s'", cmd);
		return token_usage_error(NULL, "unknown command ", bad);
	}
}
