/* STREAM's Add kernel (c = a + b, fp32), the reference the suite's DRAM figure is checked against: each array
 * N floats (default 2^27: 512 MiB, 16x a 32 MiB L3), OpenMP threads as OMP_NUM_THREADS says, the best of REPS
 * timed passes after one untimed pass. Bandwidth counts what STREAM counts: 3 arrays moved (2 read, 1 written).
 * Build: gcc -O3 -march=native -fopenmp stream_add.c -o stream_add; run: ./stream_add [N] [REPS] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1L << 27;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *c = malloc(n * sizeof(float));
#pragma omp parallel for
    for (long i = 0; i < n; i++) { a[i] = 1.0f; b[i] = 2.0f; c[i] = 0.0f; }
    double best_s = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t = omp_get_wtime();
#pragma omp parallel for
        for (long i = 0; i < n; i++) c[i] = a[i] + b[i];
        t = omp_get_wtime() - t;
        if (r > 0 && t < best_s) best_s = t;
    }
    printf("stream add: n=%ld threads=%d best %.4f s, %.1f GB/s (check %.1f)\n", n, omp_get_max_threads(), best_s,
           3.0 * n * sizeof(float) / best_s / 1e9, c[n / 2]);
    return 0;
}
