// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * insncount: a qemu TCG plugin that counts how many times each guest
 * instruction inside the given address ranges ran.
 *
 *   -plugin insncount.so,range=LO:HI,range=LO:HI,out=FILE
 *
 * LO and HI are hexadecimal guest virtual addresses (HI excluded), at most
 * 64 ranges of at most 1 MiB each. At exit FILE gets one line per
 * instruction that ran: "ADDRESS COUNT", both hexadecimal and decimal.
 * Each instruction gets an inline add on its own counter when it is
 * translated, so the counts are exact, but not atomic: run qemu with
 * -accel tcg,thread=single.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_v1.h"

SCHEDLAB_PLUGIN_EXPORT int qemu_plugin_version = 1;

#define MAX_RANGES	64
#define MAX_SPAN	(1u << 20)

struct range {
	uint64_t lo, hi;
	uint64_t *count;	/* one per byte: an instruction starts anywhere */
};

static struct range ranges[MAX_RANGES];
static int nr_ranges;
static char *out_path;

static uint64_t *counter(uint64_t vaddr)
{
	int i;

	for (i = 0; i < nr_ranges; i++)
		if (vaddr >= ranges[i].lo && vaddr < ranges[i].hi)
			return &ranges[i].count[vaddr - ranges[i].lo];
	return NULL;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t i, n = qemu_plugin_tb_n_insns(tb);

	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t *c = counter(qemu_plugin_insn_vaddr(insn));

		if (c)
			qemu_plugin_register_vcpu_insn_exec_inline(insn,
					QEMU_PLUGIN_INLINE_ADD_U64, c, 1);
	}
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
	FILE *f = fopen(out_path, "w");
	uint64_t a;
	int i;

	if (!f) {
		qemu_plugin_outs("insncount: cannot write the output file\n");
		return;
	}
	for (i = 0; i < nr_ranges; i++)
		for (a = 0; a < ranges[i].hi - ranges[i].lo; a++)
			if (ranges[i].count[a])
				fprintf(f, "%" PRIx64 " %" PRIu64 "\n",
					ranges[i].lo + a, ranges[i].count[a]);
	fclose(f);
}

static int parse_range(const char *s)
{
	struct range *r = &ranges[nr_ranges];
	char *end;

	if (nr_ranges == MAX_RANGES)
		return -1;
	errno = 0;
	r->lo = strtoull(s, &end, 16);
	if (errno || *end != ':')
		return -1;
	r->hi = strtoull(end + 1, &end, 16);
	if (errno || *end || r->hi <= r->lo || r->hi - r->lo > MAX_SPAN)
		return -1;
	r->count = calloc(r->hi - r->lo, sizeof(*r->count));
	if (!r->count)
		return -1;
	nr_ranges++;
	return 0;
}

SCHEDLAB_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					       const struct qemu_info_t *info,
					       int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "range=", 6)) {
			if (parse_range(argv[i] + 6))
				goto bad;
		} else if (!strncmp(argv[i], "out=", 4) && argv[i][4]) {
			out_path = strdup(argv[i] + 4);
		} else {
			goto bad;
		}
	}
	if (!nr_ranges || !out_path)
		goto bad;
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
bad:
	fprintf(stderr, "insncount: expected range=LO:HI (hex, at most %d, each at most %u bytes) and out=FILE\n",
		MAX_RANGES, MAX_SPAN);
	return -1;
}
