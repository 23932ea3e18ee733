/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A coherence directory with unbounded caches, and the calls it counts in.
 *
 * For each 64-byte line: which vCPUs hold a copy and which vCPU wrote it
 * last.  Every access of every vCPU goes through coh_access() in the one
 * order the emulator ran them, so the counts are exact for that execution:
 *
 *   a transfer in: a load of a line this vCPU does not hold, last written by
 *     another vCPU (the line comes from that vCPU's cache);
 *   an invalidation: a store to a line other vCPUs hold (their copies go).
 *
 * Each is classed by the distance between the two vCPUs in the guest's
 * topology, for an invalidation the farthest holder's.  A load of a line
 * nobody wrote since the start is a cold miss, not a transfer.  A locked
 * read-modify-write (which single-thread TCG runs as a load and a store)
 * is one request: its load counts nothing, its store as any store.
 *
 * Calls: coh_enter() opens a frame on a vCPU, coh_return() closes it when
 * the load of its return address comes; every access and instruction of
 * the vCPU in between counts in every open frame (callees included), but
 * a user-mode call counts no access of the kernel's (an interrupt, a page
 * fault) and a kernel call none of user mode.
 *
 * No qemu here: linecount.c feeds it from the emulator, cohreplay.c from a
 * recorded trace (the tests).
 */
#ifndef SCHEDLAB_COHERENCE_H
#define SCHEDLAB_COHERENCE_H

#include <stdint.h>
#include <stdio.h>

#define COH_MAX_VCPUS	64
#define COH_MAX_DEPTH	16
#define COH_LINE_SHIFT	6

enum coh_dist {
	COH_SMT,		/* the same core */
	COH_LLC,		/* another core of the same last-level cache */
	COH_XLLC,		/* another last-level cache of the same node */
	COH_NODE,		/* another node */
	COH_NR_DIST,
};

/* Where each vCPU sits: ids only compared for equality. */
struct coh_place {
	int core, llc, node;
};

/* What one call did.  "apart" counts the accesses of code in the apart
 * range (BPF programs, trampolines), which the other fields leave out. */
struct coh_counts {
	uint64_t insns, loads, stores, atomics, lines;
	uint64_t xfer[COH_NR_DIST];	/* transfers in, by distance */
	uint64_t inval[COH_NR_DIST];	/* invalidations, by farthest holder */
	uint64_t copies;		/* copies invalidated */
	uint64_t cold;			/* loads of lines never written */
	uint64_t apart;			/* accesses of code in the apart range */
};

/* Access flags. */
#define COH_STORE	1u
#define COH_ATOMIC	2u	/* of a locked read-modify-write instruction */
#define COH_APART	4u
#define COH_USER	8u	/* of a user-mode instruction */

int coh_init(int nr_vcpus, const struct coh_place *place, FILE *out);
enum coh_dist coh_distance(int a, int b);
void coh_access(int vcpu, uint64_t line, unsigned int flags);
/* N instructions ran on VCPU, in user mode or not. */
void coh_insns(int vcpu, uint64_t n, int user);
/* COUNTED: instructions already counted (coh_insns) that are the call's;
 * LEVEL: the call's key, -1 for a call not keyed by the marks. */
void coh_enter(int vcpu, int func, int level, uint64_t slot, uint64_t counted,
	       int user);
void coh_return(int vcpu, uint64_t slot);
/* A mark stored on VCPU: the key of its innermost call, if that is keyed. */
void coh_mark(int vcpu, int mark);
void coh_epoch(void);
void coh_finish(void);
/* Totals, for the summary line. */
extern uint64_t coh_lost, coh_deep, coh_calls, coh_epochs, coh_skipped;

#endif
