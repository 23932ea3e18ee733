/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The kind of an x86-64 instruction from its bytes (x86insn.c). */
#ifndef SCHEDLAB_X86INSN_H
#define SCHEDLAB_X86INSN_H

#include <stddef.h>
#include <stdint.h>

#define K_CALL		1u	/* call: stores a return address */
#define K_RET		2u	/* near return: loads one */
#define K_ATOMIC	4u	/* a locked read-modify-write (a lock prefix, xchg) */

unsigned int x86_kind(const uint8_t *b, size_t n);

#endif
