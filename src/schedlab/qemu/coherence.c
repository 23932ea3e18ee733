// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The coherence directory and the per-call counts: see coherence.h.
 *
 * Lines are kept in a two-level table: 2^22 chunks of 4096 lines, so the
 * keys span 2^40 bytes; a chunk is allocated when one of its lines is first
 * touched.  Accesses beyond that span are not counted (coh_skipped).
 */
#include <stdlib.h>
#include <string.h>

#include "coherence.h"

#define CHUNK_SHIFT	12
#define TOP_SHIFT	22
#define NO_WRITER	0xff
#define SET_SIZE	2048	/* distinct lines a frame tells apart */
/* A return whose slot is farther above a frame's is on another stack. */
#define STACK_SPAN	(16u << 10)

struct line {
	uint64_t holders;
	uint8_t writer;
};

struct frame {
	int func, level;
	uint64_t slot, insns0;
	unsigned int user;	/* COH_USER or 0 */
	struct coh_counts c;
	uint64_t set[SET_SIZE];	/* line + 1, open addressing */
	int full;
};

struct vcpu {
	uint64_t insns[2];	/* kernel, user */
	int depth;
	struct frame frames[COH_MAX_DEPTH];
};

static struct line **top;
static struct vcpu *vcpus;
static struct coh_place places[COH_MAX_VCPUS];
static int nr;
static FILE *out;
static uint64_t epoch;
uint64_t coh_lost, coh_deep, coh_calls, coh_epochs, coh_skipped;


int coh_init(int nr_vcpus, const struct coh_place *place, FILE *f)
{
	if (nr_vcpus < 1 || nr_vcpus > COH_MAX_VCPUS)
		return -1;
	top = calloc(1ul << TOP_SHIFT, sizeof(*top));
	vcpus = calloc(nr_vcpus, sizeof(*vcpus));
	if (!top || !vcpus)
		return -1;
	memcpy(places, place, nr_vcpus * sizeof(*place));
	nr = nr_vcpus;
	out = f;
	return 0;
}

enum coh_dist coh_distance(int a, int b)
{
	if (places[a].node != places[b].node)
		return COH_NODE;
	if (places[a].llc != places[b].llc)
		return COH_XLLC;
	if (places[a].core != places[b].core)
		return COH_LLC;
	return COH_SMT;
}

static struct line *lookup(uint64_t key)
{
	uint64_t hi = key >> CHUNK_SHIFT;
	struct line **chunk, *l;
	uint64_t i;

	if (hi >> TOP_SHIFT)
		return NULL;
	chunk = &top[hi];
	if (!*chunk) {
		l = malloc(sizeof(*l) << CHUNK_SHIFT);
		if (!l)
			return NULL;
		for (i = 0; i < (1u << CHUNK_SHIFT); i++) {
			l[i].holders = 0;
			l[i].writer = NO_WRITER;
		}
		*chunk = l;
	}
	return &(*chunk)[key & ((1u << CHUNK_SHIFT) - 1)];
}

/* Whether FR saw KEY before in this call; remembers it. */
static int seen(struct frame *fr, uint64_t key)
{
	uint64_t h = (key * 0x9e3779b97f4a7c15ull) >> 53;
	unsigned int i;

	for (i = 0; i < SET_SIZE; i++) {
		uint64_t *s = &fr->set[(h + i) & (SET_SIZE - 1)];

		if (*s == key + 1)
			return 1;
		if (!*s) {
			*s = key + 1;
			return 0;
		}
	}
	fr->full = 1;
	return 1;
}

/* The farthest holder of MASK from vCPU V. */
static enum coh_dist farthest(int v, uint64_t mask)
{
	enum coh_dist d = COH_SMT, e;
	int w;

	for (w = 0; w < nr; w++) {
		if (!(mask & (1ull << w)))
			continue;
		e = coh_distance(v, w);
		if (e > d)
			d = e;
	}
	return d;
}

void coh_access(int vcpu, uint64_t key, unsigned int flags)
{
	struct line *l = lookup(key);
	struct vcpu *cpu = &vcpus[vcpu];
	uint64_t me = 1ull << vcpu, others;
	int xfer = -1, inval = -1, copies = 0, cold = 0, i;

	if (!l) {
		coh_skipped++;
		return;
	}
	if (flags & COH_STORE) {
		others = l->holders & ~me;
		if (others) {
			inval = farthest(vcpu, others);
			copies = __builtin_popcountll(others);
		}
		l->holders = me;
		l->writer = vcpu;
	} else if (flags & COH_ATOMIC) {
		/*
		 * The load of a locked read-modify-write: one request for the
		 * line, which its store counts (an invalidation of the others'
		 * copies).
		 */
	} else {
		if (!(l->holders & me)) {
			/* Not the writer: a writer holds its line until another store. */
			if (l->writer == NO_WRITER)
				cold = 1;
			else
				xfer = coh_distance(vcpu, l->writer);
		}
		l->holders |= me;
	}
	for (i = 0; i < cpu->depth; i++) {
		struct coh_counts *c = &cpu->frames[i].c;

		if ((flags & COH_USER) != cpu->frames[i].user)
			continue;
		if (flags & COH_APART) {
			c->apart++;
			continue;
		}
		if (flags & COH_STORE) {
			c->stores++;
			if (flags & COH_ATOMIC)
				c->atomics++;
		} else {
			c->loads++;
		}
		if (!seen(&cpu->frames[i], key))
			c->lines++;
		if (xfer >= 0)
			c->xfer[xfer]++;
		if (inval >= 0)
			c->inval[inval]++;
		c->copies += copies;
		c->cold += cold;
	}
}

void coh_insns(int vcpu, uint64_t n, int user)
{
	vcpus[vcpu].insns[!!user] += n;
}

void coh_enter(int vcpu, int func, int level, uint64_t slot, uint64_t counted,
	       int user)
{
	struct vcpu *cpu = &vcpus[vcpu];
	struct frame *fr;

	if (cpu->depth == COH_MAX_DEPTH) {
		coh_deep++;
		return;
	}
	fr = &cpu->frames[cpu->depth++];
	memset(&fr->c, 0, sizeof(fr->c));
	memset(fr->set, 0, sizeof(fr->set));
	fr->func = func;
	fr->level = level;
	fr->slot = slot;
	fr->insns0 = cpu->insns[!!user] - counted;
	fr->full = 0;
	fr->user = user ? COH_USER : 0;
}

static void emit(int vcpu, struct frame *fr)
{
	const struct coh_counts *c = &fr->c;

	coh_calls++;
	if (!out)
		return;
	fprintf(out, "%d %d %d %llu %llu %llu %llu %llu %llu%s",
		fr->func, fr->level, vcpu, (unsigned long long)epoch,
		(unsigned long long)(vcpus[vcpu].insns[!!fr->user] - fr->insns0),
		(unsigned long long)c->loads, (unsigned long long)c->stores,
		(unsigned long long)c->atomics, (unsigned long long)c->lines,
		fr->full ? "+" : "");
	for (int d = 0; d < COH_NR_DIST; d++)
		fprintf(out, " %llu", (unsigned long long)c->xfer[d]);
	for (int d = 0; d < COH_NR_DIST; d++)
		fprintf(out, " %llu", (unsigned long long)c->inval[d]);
	fprintf(out, " %llu %llu %llu\n", (unsigned long long)c->copies,
		(unsigned long long)c->cold, (unsigned long long)c->apart);
}

/*
 * The load of a return address at SLOT: it closes the frame whose call
 * stored it, and those of the functions it jumped to in tail calls, which
 * share its slot.  Frames opened below it on the same stack (lower addresses,
 * less than a stack's size away) that are still open were left without
 * their return being seen: lost.  A return on another stack (an interrupt's)
 * closes nothing.
 */
void coh_return(int vcpu, uint64_t slot)
{
	struct vcpu *cpu = &vcpus[vcpu];

	while (cpu->depth && cpu->frames[cpu->depth - 1].slot < slot &&
	       slot - cpu->frames[cpu->depth - 1].slot < STACK_SPAN) {
		cpu->depth--;
		coh_lost++;
	}
	/* A function a call jumped to (a tail call) shares its caller's slot. */
	while (cpu->depth && cpu->frames[cpu->depth - 1].slot == slot)
		emit(vcpu, &cpu->frames[--cpu->depth]);
}

/*
 * A balance stores its mark after its own entry (sched_balance_rq()) but
 * before it calls anything counted: the mark keys the innermost call.
 */
void coh_mark(int vcpu, int mark)
{
	struct vcpu *cpu = &vcpus[vcpu];

	if (cpu->depth && cpu->frames[cpu->depth - 1].level != -1)
		cpu->frames[cpu->depth - 1].level = mark;
}

void coh_epoch(void)
{
	epoch++;
	coh_epochs++;
}

void coh_finish(void)
{
	int v;

	for (v = 0; v < nr; v++) {
		coh_lost += vcpus[v].depth;
		vcpus[v].depth = 0;
	}
	if (out)
		fprintf(out, "# calls %llu lost %llu deep %llu epochs %llu skipped %llu\n",
			(unsigned long long)coh_calls, (unsigned long long)coh_lost,
			(unsigned long long)coh_deep, (unsigned long long)coh_epochs,
			(unsigned long long)coh_skipped);
}
