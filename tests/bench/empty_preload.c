/* An empty library, preloaded by spawn_cost as the reference: what loading
 * any library at all costs a process. */
int msq_bench_empty_preload(void);

int msq_bench_empty_preload(void)
{
	return 0;
}
