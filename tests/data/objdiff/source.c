static const char *names[] = { "alpha", "beta" };
extern int ext(int);
static int helper(int x) { return ext(x) + 1; }
int prod_a(int x) { return helper(x) * 3; }
const char *prod_b(int i) { return names[i & 1]; }
int prod_c(int x) { if (x > 5) return prod_a(x); return ext(x - 1); }
#ifdef WITH_TEST
static const char *tnames[] = { "test-one", "test-two" };
int test_only(int x) { return prod_a(x) + (tnames[x & 1][0]); }
#endif
#ifdef BREAK
int prod_d(int x) { return x + 2; }
#else
int prod_d(int x) { return x + 1; }
#endif
