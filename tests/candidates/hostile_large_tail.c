/* hostile_large_tail.c: a plain loop below 4096 elements; from 4096 on, 8
 * elements a step and no tail, so the last n % 8 are never written. Right at
 * the timed n = 100000 and at the small unannounced shapes (n = 255, 257),
 * wrong at the odd one past the largest timed size (n = 100001) alone. */
void vecadd(int n, const float *a, const float *b, float *c) {
    if (n < 4096) {
        for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
        return;
    }
    for (int i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) c[i + j] = a[i + j] + b[i + j];
}
