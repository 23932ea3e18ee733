/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The part of qemu's TCG plugin interface, API version 1 (qemu 5.2 to 8.1,
 * Debian 12's qemu 7.2 among them), that insncount.c uses. Debian ships no
 * qemu-plugin.h; these declarations name the symbols qemu exports to its
 * plugins, with the types the loader passes.
 */
#ifndef SCHEDLAB_QEMU_PLUGIN_V1_H
#define SCHEDLAB_QEMU_PLUGIN_V1_H

#include <stddef.h>
#include <stdint.h>

#define SCHEDLAB_PLUGIN_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;

/* Opaque here: only its address is passed to qemu_plugin_install(). */
struct qemu_info_t;

struct qemu_plugin_tb;
struct qemu_plugin_insn;

/* Only the first op exists in version 1: add an immediate to a u64. */
enum qemu_plugin_op {
	QEMU_PLUGIN_INLINE_ADD_U64,
};

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id,
						struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
				    qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
						 size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
						enum qemu_plugin_op op,
						void *ptr, uint64_t imm);
void qemu_plugin_outs(const char *string);

#endif
