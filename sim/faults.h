/*
 * faults.h - fault rules, the control file and the call log, shared by the
 * NVML simulator (nvml_sim.c) and the AMD SMI one (amdsmi_sim.c).
 * docs/simulator.md is the user-facing version of this comment.
 *
 * Environment, read by sim_faults_configure (a simulator's first init):
 *   ZEUS_SIM_FAULTS   fault rules separated by ';' or newlines, fixed until
 *                     the next configure
 *   ZEUS_SIM_CONTROL  path of a control file of fault rules, one per line;
 *                     re-read whenever its device, inode, size, mtime or
 *                     ctime changes (checked on every call). Write a new
 *                     file and rename() it over the old one so a change is
 *                     never missed. A missing file means no rules from it.
 *   ZEUS_SIM_LOG      path of a call log to append to (format below); opened
 *                     by the first configure that finds it closed
 *
 * Fault rules ('#' starts a comment line; blank lines are ignored):
 *   fail  <function|*> <gpu|*> <code>   the call returns <code>
 *   delay <function|*> <gpu|*> <ms>     the call sleeps <ms> (0..600000)
 * <function> is one of the dialect's function names (an exported symbol);
 * <gpu> a decimal index up to the dialect's gpu_max; `*` matches anything;
 * <code> one of the dialect's code names, with or without its prefix, or a
 * decimal number up to code_max. Words are separated by spaces, tabs or
 * CRs; a rule is at most SIM_RULE_MAX - 1 bytes, at most SIM_MAX_RULES
 * rules are kept from each source and SIM_CONTROL_MAX bytes are read from
 * the control file. Control-file rules are checked before ZEUS_SIM_FAULTS
 * rules and the first matching `fail` rule wins, so `fail <f> <gpu>
 * SUCCESS` in the control file lifts a fault set in the environment;
 * likewise, separately, for `delay`. A call that names no GPU matches only
 * `*` rules. Delays are slept with no lock held.
 *
 * Call log: one line per call, written with a single write() to an
 * O_APPEND descriptor when the call returns:
 *   <start_ns> <function> <gpu|-> [args...] rc=<CODE> end_ns=<ns>
 * where the times are CLOCK_MONOTONIC nanoseconds (start_ns before any
 * injected delay) and CODE is the returned code's name without prefix.
 *
 * Where the two simulators differ (struct sim_dialect):
 *   - NVML is strict: a bad rule in ZEUS_SIM_FAULTS, a ZEUS_SIM_CONTROL path
 *     of PATH_MAX bytes or more, or a ZEUS_SIM_LOG that cannot be opened
 *     fails configure after one line on stderr, and a bad control-file rule
 *     is skipped with a line on stderr. AMD SMI skips all of them silently.
 *   - NVML's rule is exactly four words; AMD SMI's ignores words after the
 *     fourth (so `fail f * CODE # why` works there).
 *   - NVML reads ZEUS_SIM_CONTROL at configure; AMD SMI on every call (a
 *     test may set it after amdsmi_init), so its control rules also apply
 *     to calls before the first init.
 *   - A code that has no name is logged in decimal by NVML, as OTHER by AMD
 *     SMI; codes go up to 999 in NVML, to 0xFFFFFFFF in AMD SMI.
 *   - GPU indices go up to 63 in NVML, 15 in AMD SMI.
 * The caller decides what a call does before sim_faults_begin (NVML answers
 * UNINITIALIZED before init without consulting the rules or the log; AMD
 * SMI applies them to every call) and what `fail` overrides (NVML: a part's
 * unsupported operations, see sim_call.ruled).
 *
 * Thread safety: each struct sim_faults has its own mutex; a caller may
 * hold its own lock around these calls but sim_faults_begin, which sleeps.
 */
#ifndef ZEUS_SIM_FAULTS_H
#define ZEUS_SIM_FAULTS_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim_os.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

#define SIM_MAX_RULES 256		/* per source */
#define SIM_RULE_MAX 512		/* bytes in a rule, its end included */
#define SIM_CONTROL_MAX (64 * 1024)	/* bytes read from the control file */
#define SIM_MAX_DELAY_MS 600000u

/* A library's return code: its number, its name in rules and logs (without
 * prefix), and its text where the library gives one (else NULL). */
struct sim_code {
	unsigned code;
	const char *name;
	const char *text;
};

/* What a simulator's rules are made of, and how strictly they are read. */
struct sim_dialect {
	const char *tag;	/* stderr prefix: "nvml-sim" */
	const char *const *fns;	/* function names; a rule's function is
				 * its index here */
	unsigned nfns;
	const struct sim_code *codes;
	unsigned ncodes;
	const char *prefix;	/* optional before a code name */
	const char *success;	/* another spelling of code 0, or NULL */
	unsigned long code_max;	/* highest decimal <code> */
	unsigned gpu_max;	/* highest <gpu> */
	const char *other;	/* log name of a code without one; NULL: its
				 * decimal number */
	bool strict;		/* bad settings fail configure; bad
				 * control-file rules are reported */
	bool extra_words;	/* words after the fourth are ignored */
	bool control_live;	/* ZEUS_SIM_CONTROL read on every call */
};

enum sim_rule_kind { SIM_FAIL, SIM_DELAY };

struct sim_rule {
	enum sim_rule_kind kind;
	int fn;			/* index into the dialect's fns, or -1: any */
	int gpu;		/* index, or -1: any */
	unsigned code;		/* SIM_FAIL */
	unsigned delay_ms;	/* SIM_DELAY */
};

struct sim_rules {
	struct sim_rule r[SIM_MAX_RULES];
	unsigned n;
};

/* One simulator's rules and log. Static, set up with SIM_FAULTS_INIT. */
struct sim_faults {
	const struct sim_dialect *d;
	pthread_mutex_t lock;		/* guards all below */
	struct sim_rules env_rules, file_rules;
	char control_path[PATH_MAX];	/* "": none */
	struct sim_stamp stamp;		/* of the rules in file_rules */
	int log_fd;			/* -1: no log */
};

#define SIM_FAULTS_INIT(dialect) { .d = (dialect), \
	.lock = PTHREAD_MUTEX_INITIALIZER, .log_fd = -1 }

/* One call in flight: what its log line needs. */
struct sim_call {
	unsigned fn;			/* index into the dialect's fns */
	int gpu;			/* -1: none */
	uint64_t start_ns;
	int log_fd;			/* -1: not logged */
	bool ruled;			/* a `fail` rule decided the code */
	char args[96];
};

/*
 * Reads ZEUS_SIM_FAULTS, ZEUS_SIM_CONTROL (unless control_live) and
 * ZEUS_SIM_LOG. Returns -1 after a line on stderr for a bad setting (strict
 * dialects only), else 0.
 */
SIM_HIDDEN int sim_faults_configure(struct sim_faults *f);
/* Closes the call log (a strict simulator's last shutdown). */
SIM_HIDDEN void sim_faults_close_log(struct sim_faults *f);

/* Starts a call of function `fn` on `gpu` (-1: none): its start time; not
 * logged and not ruled until sim_faults_begin. */
SIM_HIDDEN void sim_call_start(struct sim_call *c, unsigned fn, int gpu);
/*
 * Applies the rules to a started call: re-reads the control file if it
 * changed, takes the log, sleeps the first matching delay with no lock
 * held and returns the first matching `fail` rule's code (c->ruled set),
 * or 0, which is SUCCESS in both libraries, when none matches.
 */
SIM_HIDDEN unsigned sim_faults_begin(struct sim_faults *f,
    struct sim_call *c);
/* For a call that began before the log was opened (the init that opened
 * it): takes the log, so that the call is logged after all. */
SIM_HIDDEN void sim_faults_take_log(struct sim_faults *f, struct sim_call *c);
/* The call's arguments for its log line; formatted only when logged. */
SIM_HIDDEN void sim_call_args(struct sim_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Ends a call: appends its log line (when logged) and returns rc. */
SIM_HIDDEN unsigned sim_faults_end(const struct sim_faults *f,
    const struct sim_call *c, unsigned rc);

/*
 * One rule line into `rules` (the parser, apart for tests and fuzzing):
 * 0 for a rule added, a blank line or a comment; -1 for a malformed rule or
 * one past SIM_MAX_RULES. `line` is at most SIM_RULE_MAX - 1 bytes and is
 * modified.
 */
SIM_HIDDEN int sim_rule_parse(const struct sim_dialect *d, char *line,
    struct sim_rules *rules);
/* Rules separated by any of `seps` (blank: skipped), each as above. */
SIM_HIDDEN int sim_rules_parse(const struct sim_dialect *d, const char *text,
    const char *seps, bool strict, struct sim_rules *rules);
/* The first rule of `kind` in `rules` for `fn` on `gpu`, or NULL. */
SIM_HIDDEN const struct sim_rule *sim_rule_find(const struct sim_rules *rules,
    enum sim_rule_kind kind, unsigned fn, int gpu);
/* The entry of `code` in the dialect's table, or NULL. */
SIM_HIDDEN const struct sim_code *sim_code_find(const struct sim_dialect *d,
    unsigned code);

#endif
