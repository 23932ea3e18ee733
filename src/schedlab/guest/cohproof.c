// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cohproof: guest programs whose cache-line traffic is known, to prove the
 * linecount plugin (qemu/linecount.c) counts right, and the marker the lab's
 * runner calls to start a counting epoch.  Built static, its code at a
 * fixed address no other guest program uses (measuring/linecount.py).
 *
 *   cohproof mark                    one epoch mark (lines_mark())
 *   cohproof pingpong N A B [HOME]   one line, N strict round trips between CPUs A and B
 *   cohproof own N A [HOME]          one thread reads its own lines N times, twice
 *   cohproof false N A B [HOME]      two counters in one line, lockstep, N rounds
 *   cohproof padded N A B [HOME]     the same with each counter in a line of its own
 *   cohproof atomic N A B [HOME]     N locked adds and N exchanges a thread, one counter
 *
 * Each thread pins itself, then runs its part in one call of a function
 * named proof_*, which the plugin is told to count.  The plugin counts a
 * call's accesses by vCPU, whichever task makes them: the main thread
 * writes the shared memory on CPU A, then moves to CPU HOME (when given),
 * away from the threads, to start them and wait.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE 64

struct shared {
	volatile long turn __attribute__((aligned(LINE)));
	volatile long pair[2] __attribute__((aligned(LINE)));	/* one line */
	volatile long apart0 __attribute__((aligned(LINE)));
	volatile long apart1 __attribute__((aligned(LINE)));
	long counter __attribute__((aligned(LINE)));
	long swap __attribute__((aligned(LINE)));
	long own[64][LINE / sizeof(long)] __attribute__((aligned(LINE)));
};

static struct shared s;
static long rounds;

struct thread {
	int me, cpu;
	void (*part)(int me);
	pthread_t t;
};

__attribute__((noinline)) void lines_mark(void)
{
	__asm__ volatile("nop");
}

static void wait_turn(int me)
{
	while (s.turn != me)
		__builtin_ia32_pause();
}

__attribute__((noinline)) void proof_pingpong(int me)
{
	long i;

	for (i = 0; i < rounds; i++) {
		wait_turn(me);
		s.turn = !me;
	}
}

__attribute__((noinline)) void proof_own(int me __attribute__((unused)))
{
	long i, sum = 0;
	int j;

	for (i = 0; i < rounds; i++)
		for (j = 0; j < 64; j++)
			sum += ((volatile long *)s.own[j])[0];
	__asm__ volatile("" : : "r"(sum));
}

__attribute__((noinline)) void proof_false(int me)
{
	long i;

	for (i = 0; i < rounds; i++) {
		wait_turn(me);
		s.pair[me]++;
		s.turn = !me;
	}
}

__attribute__((noinline)) void proof_padded(int me)
{
	volatile long *mine = me ? &s.apart1 : &s.apart0;
	long i;

	for (i = 0; i < rounds; i++) {
		wait_turn(me);
		(*mine)++;
		s.turn = !me;
	}
}

__attribute__((noinline)) void proof_atomic(int me __attribute__((unused)))
{
	long i;

	for (i = 0; i < rounds; i++) {
		__atomic_fetch_add(&s.counter, 1, __ATOMIC_SEQ_CST);
		__atomic_exchange_n(&s.swap, i, __ATOMIC_SEQ_CST);
	}
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("cohproof: sched_setaffinity");
		exit(1);
	}
}

static void *run(void *arg)
{
	struct thread *t = arg;

	pin(t->cpu);
	t->part(t->me);
	/* Own lines: once more, with every line of the call now the thread's. */
	if (t->part == proof_own)
		t->part(t->me);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*part)(int me);
		int threads;
	} modes[] = {
		{ "pingpong", proof_pingpong, 2 }, { "own", proof_own, 1 },
		{ "false", proof_false, 2 }, { "padded", proof_padded, 2 },
		{ "atomic", proof_atomic, 2 },
	};
	struct thread t[2];
	unsigned int m;
	int i, n;

	if (argc == 2 && !strcmp(argv[1], "mark")) {
		lines_mark();
		return 0;
	}
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		if (argc > 2 && !strcmp(argv[1], modes[m].name))
			break;
	n = m < sizeof(modes) / sizeof(modes[0]) ? modes[m].threads : 0;
	if (!n || (argc != 3 + n && argc != 4 + n) || (rounds = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: cohproof mark | pingpong|false|padded|atomic N A B [HOME] | "
			"own N A [HOME]\n");
		return 2;
	}
	/* The first thread's CPU writes everything first. */
	pin(atoi(argv[3]));
	memset(&s, 0, sizeof(s));
	if (argc == 4 + n)
		pin(atoi(argv[3 + n]));
	for (i = 0; i < n; i++) {
		t[i] = (struct thread){ .me = i, .cpu = atoi(argv[3 + i]), .part = modes[m].part };
		if (pthread_create(&t[i].t, NULL, run, &t[i])) {
			perror("cohproof: pthread_create");
			return 1;
		}
	}
	for (i = 0; i < n; i++)
		pthread_join(t[i].t, NULL);
	printf("cohproof %s %ld: counter %ld pair %ld %ld\n", argv[1], rounds, s.counter,
	       s.pair[0], s.pair[1]);
	return 0;
}
