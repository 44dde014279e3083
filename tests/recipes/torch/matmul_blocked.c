/* out = A @ B, the i-k-j order: a row of out accumulated over B's rows */
#include <string.h>
void matmul(int M, int K, int N, const float *A, const float *B, float *out) {
    for (int i = 0; i < M; i++) {
        float *o = out + (size_t)i * N;
        memset(o, 0, sizeof *o * (size_t)N);
        for (int k = 0; k < K; k++) {
            float a = A[(size_t)i * K + k];
            const float *b = B + (size_t)k * N;
            for (int j = 0; j < N; j++) o[j] += a * b[j];
        }
    }
}
