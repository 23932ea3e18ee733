// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The kind of an x86-64 instruction from its bytes, as linecount.c needs
 * it: a call, a return, a locked read-modify-write.
 */
#include <string.h>

#include "x86insn.h"

unsigned int x86_kind(const uint8_t *b, size_t n)
{
	unsigned int k = 0;
	size_t i = 0;

	for (; i < n; i++) {
		if (b[i] == 0xf0)
			k |= K_ATOMIC;
		else if (!b[i] || !strchr("\xf2\xf3\x2e\x36\x3e\x26\x64\x65\x66\x67", b[i]))
			break;
	}
	if (i < n && (b[i] & 0xf0) == 0x40)	/* REX */
		i++;
	if (i >= n)
		return k;
	switch (b[i]) {
	case 0xe8:
		return k | K_CALL;
	case 0xc2:
	case 0xc3:
		return k | K_RET;
	case 0x86:
	case 0x87:	/* xchg with memory is locked without a prefix */
		if (i + 1 < n && (b[i + 1] >> 6) != 3)
			k |= K_ATOMIC;
		return k;
	case 0xff:	/* call through a register or memory: ModRM.reg 2 */
		if (i + 1 < n && ((b[i + 1] >> 3) & 7) == 2)
			k |= K_CALL;
		return k;
	}
	return k;
}
