// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cohreplay: the coherence directory (coherence.c) on a recorded trace,
 * for the plugin's tests.  Reads standard input, one event a line:
 *
 *   P VCPU CORE LLC NODE     where a vCPU sits (all before any other event)
 *   L VCPU LINE [apart|user] a load of line LINE (decimal)
 *   S VCPU LINE [atomic|apart|user]  a store
 *   E VCPU FUNC LEVEL SLOT [user]  a call of FUNC enters, its return address
 *                            at SLOT (a user-mode call with "user")
 *   R VCPU SLOT              a return loads SLOT
 *   I VCPU N [user]          N instructions ran (in user mode)
 *   M                        the next epoch
 *   K VCPU MARK              a mark stored (keys the innermost keyed call)
 *   X HEXBYTES               prints x86_kind() of an instruction's bytes
 *
 * and writes the calls' records to standard output, as the plugin does.
 */
#include <stdio.h>
#include <string.h>

#include "coherence.h"
#include "x86insn.h"

static unsigned int flag(const char *s)
{
	if (!strcmp(s, "atomic"))
		return COH_ATOMIC;
	if (!strcmp(s, "apart"))
		return COH_APART;
	if (!strcmp(s, "user"))
		return COH_USER;
	return 0;
}

int main(void)
{
	struct coh_place place[COH_MAX_VCPUS];
	char line[256], word[16];
	unsigned long long a, b;
	int n = 0, started = 0, v, f, l, c, k;

	while (fgets(line, sizeof(line), stdin)) {
		if (line[0] == 'P') {
			if (started || sscanf(line, "P %d %d %d %d", &v, &f, &l, &c) != 4 ||
			    v != n || n == COH_MAX_VCPUS)
				goto bad;
			place[n++] = (struct coh_place){ f, l, c };
			continue;
		}
		if (line[0] == 'X') {	/* needs no vCPU */
			uint8_t b[16];
			size_t nb = 0;
			unsigned int byte;
			char *p = line + 1;
			int used;

			while (nb < sizeof(b) && sscanf(p, " %2x%n", &byte, &used) == 1) {
				b[nb++] = byte;
				p += used;
			}
			printf("kind %u\n", x86_kind(b, nb));
			continue;
		}
		if (!started) {
			if (coh_init(n, place, stdout))
				goto bad;
			started = 1;
		}
		word[0] = 0;
		switch (line[0]) {
		case 'L':
		case 'S':
			k = sscanf(line + 1, "%d %llu %15s", &v, &a, word);
			if (k < 2 || v < 0 || v >= n)
				goto bad;
			coh_access(v, a, (line[0] == 'S' ? COH_STORE : 0) | flag(word));
			break;
		case 'E':
			k = sscanf(line, "E %d %d %d %llu %15s", &v, &f, &l, &a, word);
			if (k < 4 || v < 0 || v >= n)
				goto bad;
			coh_enter(v, f, l, a, 0, flag(word) == COH_USER);
			break;
		case 'R':
			if (sscanf(line, "R %d %llu", &v, &a) != 2 || v < 0 || v >= n)
				goto bad;
			coh_return(v, a);
			break;
		case 'I':
			k = sscanf(line, "I %d %llu %15s", &v, &b, word);
			if (k < 2 || v < 0 || v >= n)
				goto bad;
			coh_insns(v, b, flag(word) == COH_USER);
			break;
		case 'M':
			coh_epoch();
			break;
		case 'K':
			if (sscanf(line, "K %d %d", &v, &l) != 2 || v < 0 || v >= n)
				goto bad;
			coh_mark(v, l);
			break;
		case '#':
		case '\n':
			break;
		default:
			goto bad;
		}
	}
	if (!started && !n)
		return 0;	/* instruction kinds only */
	if (!started && coh_init(n, place, stdout))
		goto bad;
	coh_finish();
	return 0;
bad:
	fprintf(stderr, "cohreplay: bad event: %s", line);
	return 2;
}
