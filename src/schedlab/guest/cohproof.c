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
 *   cohproof idle N A B TASK         CPU A checks CPU B with idle_cpu() N times, 10 ms
 *                                    apart, while B runs TASK: sleep (a task that sleeps
 *                                    and wakes each millisecond), spin, or none
 *
 * Each thread pins itself, then runs its part in one call of a function
 * named proof_*, which the plugin is told to count.  The plugin counts a
 * call's accesses by vCPU, whichever task makes them: the main thread
 * writes the shared memory on CPU A, then moves to CPU HOME (when given),
 * away from the threads, to start them and wait.
 *
 * idle: the kernel's call is sched_lab_idle_cpu() of the measurement series
 * (patches/measure), made by a write of B's number to sched/lab_idle_cpu in
 * debugfs; the plugin counts that function.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
static volatile int stop;

#define IDLE_FILE "/sys/kernel/debug/sched/lab_idle_cpu"

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

static void sleep_ns(long ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L };

	while (nanosleep(&ts, &ts))
		;
}

static void *target_sleep(void *arg)
{
	pin(*(int *)arg);
	while (!stop)
		sleep_ns(1000000);
	return NULL;
}

static void *target_spin(void *arg)
{
	pin(*(int *)arg);
	while (!stop)
		__builtin_ia32_pause();
	return NULL;
}

/* CPU A checks CPU B ROUNDS times through the kernel, while B runs TASK. */
static int idle_checks(int a, int b, const char *task)
{
	void *(*body)(void *) = !strcmp(task, "sleep") ? target_sleep :
				!strcmp(task, "spin") ? target_spin : NULL;
	char num[16];
	pthread_t t;
	long i;
	int fd, len;

	if (!body && strcmp(task, "none")) {
		fprintf(stderr, "cohproof idle: task %s: sleep, spin or none\n", task);
		return 2;
	}
	pin(a);
	fd = open(IDLE_FILE, O_WRONLY);
	if (fd < 0) {
		perror("cohproof: " IDLE_FILE " (the measurement series' patch)");
		return 1;
	}
	if (body && pthread_create(&t, NULL, body, &b)) {
		perror("cohproof: pthread_create");
		return 1;
	}
	/* Let the target settle on its CPU first. */
	sleep_ns(50000000);
	len = snprintf(num, sizeof(num), "%d\n", b);
	for (i = 0; i < rounds; i++) {
		if (write(fd, num, len) != len) {
			perror("cohproof: write " IDLE_FILE);
			return 1;
		}
		sleep_ns(10000000);
	}
	stop = 1;
	if (body)
		pthread_join(t, NULL);
	close(fd);
	printf("cohproof idle %ld: CPU %d checked CPU %d (%s)\n", rounds, a, b, task);
	return 0;
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
	if (argc == 6 && !strcmp(argv[1], "idle")) {
		rounds = atol(argv[2]);
		return rounds > 0 ? idle_checks(atoi(argv[3]), atoi(argv[4]), argv[5]) : 2;
	}
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		if (argc > 2 && !strcmp(argv[1], modes[m].name))
			break;
	n = m < sizeof(modes) / sizeof(modes[0]) ? modes[m].threads : 0;
	if (!n || (argc != 3 + n && argc != 4 + n) || (rounds = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: cohproof mark | pingpong|false|padded|atomic N A B [HOME] | "
			"own N A [HOME] | idle N A B sleep|spin|none\n");
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
