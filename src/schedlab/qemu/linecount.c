// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * linecount: a qemu TCG plugin (API version 1, x86-64 guests) that counts,
 * per call of the given functions, the cache lines that move between vCPUs
 * (coherence.h), with the call's instructions, loads, stores, atomics and
 * distinct lines.
 *
 *   -plugin linecount.so,func=ADDR:ID[:L],...,topo=FILE,out=FILE
 *                        [,level=ADDR:SIZE][,mark=ADDR][,apart=LO:HI]
 *
 * func=ADDR:ID    a function's entry (hexadecimal guest virtual address) and
 *                 the number its calls are written with; ":L" keys its calls
 *                 by the mark last stored on the vCPU, also one stored while
 *                 the call is the vCPU's innermost (-1 when not keyed, -2
 *                 before the vCPU's first mark).
 * level=ADDR:SIZE rows of 64 bytes, each a line: a store to byte K of a row
 *                 marks K on the storing vCPU (the measurement series
 *                 stores 4 * level + idle type before each balance); those
 *                 stores are not counted.
 * mark=ADDR       each execution of this instruction (a guest program's)
 *                 starts the next epoch, which every call's record carries.
 * apart=LO:HI     accesses of code in [LO, HI) are counted apart (BPF
 *                 programs and trampolines live there).
 * topo=FILE       one line per vCPU, "VCPU CORE LLC NODE".
 * out=FILE        one line per call: see emit() in coherence.c.
 *
 * Every access of every vCPU goes through one directory: run qemu with
 * -accel tcg,thread=single, whose one thread runs the vCPUs in turn.
 * A call is matched to its return by the stack slot of its return address:
 * the slot a call instruction stored to (or the slot a return left the
 * stack at, for calls through a return trampoline), and the load of that
 * slot by a return instruction.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coherence.h"
#include "x86insn.h"
#include "qemu_plugin_v1.h"

SCHEDLAB_PLUGIN_EXPORT int qemu_plugin_version = 1;

#define MAX_FUNCS	64
#define ROW		64

/* What an instruction is, kept in its callbacks' user data: x86insn.h's
 * kinds and these. */
#define K_APART		8u
#define K_USER		16u

struct func {
	uint64_t addr;
	int id, leveled;
};

struct entry {
	const struct func *f;
	uint64_t counted;	/* the block's instructions from the entry on */
};

static struct func funcs[MAX_FUNCS];
static int nr_funcs;
static uint64_t level_addr, level_size, mark_addr, apart_lo, apart_hi;
static int level[COH_MAX_VCPUS];
static uint64_t stack_top[COH_MAX_VCPUS];
static FILE *out;
static uint64_t io_skipped;

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr,
		   void *udata)
{
	unsigned int k = (uintptr_t)udata, flags = 0;
	int store = qemu_plugin_mem_is_store(info);
	struct qemu_plugin_hwaddr *hw;
	uint64_t pa, size;

	if (store && vaddr - level_addr < level_size) {
		level[vcpu] = (vaddr - level_addr) % ROW;
		coh_mark(vcpu, level[vcpu]);
		return;
	}
	if ((k & K_CALL) && store)
		stack_top[vcpu] = vaddr;
	hw = qemu_plugin_get_hwaddr(info, vaddr);
	if (hw && !qemu_plugin_hwaddr_is_io(hw)) {
		pa = qemu_plugin_hwaddr_phys_addr(hw);
		size = 1ull << qemu_plugin_mem_size_shift(info);
		flags = (store ? COH_STORE : 0) | ((k & K_ATOMIC) ? COH_ATOMIC : 0) |
			((k & K_APART) ? COH_APART : 0) | ((k & K_USER) ? COH_USER : 0);
		coh_access(vcpu, pa >> COH_LINE_SHIFT, flags);
		if ((pa & ((1u << COH_LINE_SHIFT) - 1)) + size > (1u << COH_LINE_SHIFT))
			coh_access(vcpu, (pa >> COH_LINE_SHIFT) + 1, flags);
	} else {
		io_skipped++;
	}
	if ((k & K_RET) && !store) {
		coh_return(vcpu, vaddr);
		stack_top[vcpu] = vaddr + 8;
	}
}

/* The block's instructions, times two, plus one in user mode. */
static void on_tb(unsigned int vcpu, void *udata)
{
	uintptr_t n = (uintptr_t)udata;

	coh_insns(vcpu, n >> 1, n & 1);
}

static void on_entry(unsigned int vcpu, void *udata)
{
	const struct entry *e = udata;

	coh_enter(vcpu, e->f->id, e->f->leveled ? level[vcpu] : -1, stack_top[vcpu],
		  e->counted, !(e->f->addr >> 63));
}

static void on_mark(unsigned int vcpu, void *udata)
{
	coh_epoch();
	/* What a killed qemu leaves is whole up to the last window. */
	fflush(out);
}

static const struct func *func_at(uint64_t vaddr)
{
	int i;

	for (i = 0; i < nr_funcs; i++)
		if (funcs[i].addr == vaddr)
			return &funcs[i];
	return NULL;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t i, n = qemu_plugin_tb_n_insns(tb);

	if (!n)
		return;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb, QEMU_PLUGIN_CB_NO_REGS,
		(void *)(uintptr_t)(n << 1 |
			!(qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0)) >> 63)));
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t va = qemu_plugin_insn_vaddr(insn);
		unsigned int k = x86_kind(qemu_plugin_insn_data(insn),
					  qemu_plugin_insn_size(insn));
		const struct func *f = func_at(va);

		if (va >= apart_lo && va < apart_hi)
			k |= K_APART;
		if (!(va >> 63))
			k |= K_USER;
		if (f) {
			struct entry *e = malloc(sizeof(*e));

			if (e) {
				e->f = f;
				e->counted = n - i;
				qemu_plugin_register_vcpu_insn_exec_cb(insn, on_entry,
						QEMU_PLUGIN_CB_NO_REGS, e);
			}
		}
		if (mark_addr && va == mark_addr)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark,
					QEMU_PLUGIN_CB_NO_REGS, NULL);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, (void *)(uintptr_t)k);
	}
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
	coh_finish();
	fprintf(out, "# io-or-unmapped %" PRIu64 "\n", io_skipped);
	fclose(out);
}

static int hex(const char *s, uint64_t *v, char stop)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 16);
	return errno || end == s || *end != stop ? -1 : (int)(end - s);
}

static int parse_func(const char *s)
{
	struct func *f = &funcs[nr_funcs];
	char *end;
	int n;

	if (nr_funcs == MAX_FUNCS || (n = hex(s, &f->addr, ':')) < 0)
		return -1;
	errno = 0;
	f->id = strtol(s + n + 1, &end, 10);
	if (errno || end == s + n + 1 || f->id < 0)
		return -1;
	f->leveled = !strcmp(end, ":L");
	if (*end && !f->leveled)
		return -1;
	nr_funcs++;
	return 0;
}

static int read_topo(const char *path, int want)
{
	struct coh_place place[COH_MAX_VCPUS];
	FILE *f = fopen(path, "r");
	int v, core, llc, node, n = 0;

	if (!f)
		return -1;
	while (fscanf(f, "%d %d %d %d", &v, &core, &llc, &node) == 4) {
		if (v != n || n == COH_MAX_VCPUS)
			break;
		place[n++] = (struct coh_place){ core, llc, node };
	}
	fclose(f);
	if (n != want)
		return -1;
	return coh_init(n, place, out);
}

SCHEDLAB_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					       const struct qemu_info_t *info,
					       int argc, char **argv)
{
	const char *topo = NULL, *path = NULL;
	int i, n;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "func=", 5)) {
			if (parse_func(a + 5))
				goto bad;
		} else if (!strncmp(a, "level=", 6)) {
			if ((n = hex(a + 6, &level_addr, ':')) < 0 ||
			    hex(a + 7 + n, &level_size, 0) < 0 || level_addr % ROW ||
			    level_size % ROW)
				goto bad;
		} else if (!strncmp(a, "mark=", 5)) {
			if (hex(a + 5, &mark_addr, 0) < 0)
				goto bad;
		} else if (!strncmp(a, "apart=", 6)) {
			if ((n = hex(a + 6, &apart_lo, ':')) < 0 ||
			    hex(a + 7 + n, &apart_hi, 0) < 0 || apart_hi <= apart_lo)
				goto bad;
		} else if (!strncmp(a, "topo=", 5) && a[5]) {
			topo = a + 5;
		} else if (!strncmp(a, "out=", 4) && a[4]) {
			path = a + 4;
		} else {
			goto bad;
		}
	}
	if (!nr_funcs || !topo || !path || !info->system_emulation)
		goto bad;
	if (info->system.max_vcpus > COH_MAX_VCPUS) {
		fprintf(stderr, "linecount: %d possible vCPUs, at most %d\n",
			info->system.max_vcpus, COH_MAX_VCPUS);
		return -1;
	}
	/* Keyed calls before a vCPU's first mark: -2. */
	for (i = 0; i < COH_MAX_VCPUS; i++)
		level[i] = -2;
	out = fopen(path, "w");
	if (!out || read_topo(topo, info->system.max_vcpus)) {
		fprintf(stderr, "linecount: cannot write %s, or %s is not one line per "
			"possible vCPU (%d)\n", path, topo, info->system.max_vcpus);
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
bad:
	fprintf(stderr, "linecount: expected func=ADDR:ID[:L] (at most %d), topo=FILE, "
		"out=FILE, and optionally level=ADDR:SIZE (64-byte rows), mark=ADDR, apart=LO:HI (hexadecimal); "
		"system emulation only\n", MAX_FUNCS);
	return -1;
}
