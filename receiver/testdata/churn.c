// churn: processes that map and unmap GGML over and over, and exit, so that profinfer
// finds their libraries, or the processes themselves, gone in the middle of attaching.
// ROUNDS children, one after the other, each dlopen the GGML library named by the first
// argument (one whose dlclose unmaps it: node-llama-cpp 3.1.1's libggml.so, with the CPU
// backend inside), dlclose it 10 to 175 ms later (before profinfer looks at it, 20 ms
// after the loader's notice, while it attaches, or after), and exit 5 ms after that. Then the parent keeps the
// library, creates the file steady in the directory named by its second argument, and
// computes a small graph five times a second until the file done exists there, so that
// the test can see profinfer profile it after all that.
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 60

// The few GGML calls used, declared by hand: their signatures are the same in every
// release since 2024.
struct ggml_init_params {
	size_t mem_size;
	void *mem_buffer;
	bool no_alloc;
};
typedef void *(*init_fn)(struct ggml_init_params);
typedef void *(*new_1d_fn)(void *ctx, int type, int64_t ne0);
typedef void *(*binary_fn)(void *ctx, void *a, void *b);
typedef void *(*new_graph_fn)(void *ctx);
typedef void (*expand_fn)(void *graph, void *tensor);
typedef int (*compute_fn)(void *ctx, void *graph, int n_threads);
typedef void (*free_fn)(void *ctx);

#define SYM(type, name)                                           \
	type name = (type)dlsym(lib, #name);                      \
	if (!name) {                                              \
		fprintf(stderr, "churn: no %s\n", #name);         \
		return 1;                                         \
	}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: churn LIBGGML DIR\n");
		return 2;
	}
	for (int i = 0; i < ROUNDS; i++) {
		pid_t child = fork();
		if (child < 0)
			return 1;
		if (child == 0) {
			void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
			if (!lib) {
				fprintf(stderr, "churn: %s\n", dlerror());
				_exit(1);
			}
			usleep(10000 + 15000 * (i % 12));
			dlclose(lib);
			usleep(5000);
			_exit(0);
		}
		int status;
		if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "churn: child %d failed\n", i);
			return 1;
		}
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "churn: %s\n", dlerror());
		return 1;
	}
	SYM(init_fn, ggml_init)
	SYM(new_1d_fn, ggml_new_tensor_1d)
	SYM(binary_fn, ggml_mul)
	SYM(binary_fn, ggml_add)
	SYM(new_graph_fn, ggml_new_graph)
	SYM(expand_fn, ggml_build_forward_expand)
	SYM(compute_fn, ggml_graph_compute_with_ctx)
	SYM(free_fn, ggml_free)
	char path[4096];
	snprintf(path, sizeof(path), "%s/steady", argv[2]);
	FILE *steady = fopen(path, "w");
	if (!steady)
		return 1;
	fclose(steady);
	char done[4096];
	snprintf(done, sizeof(done), "%s/done", argv[2]);
	while (access(done, F_OK) != 0) {
		struct ggml_init_params p = {64 << 20, NULL, false};
		void *ctx = ggml_init(p);
		void *a = ggml_new_tensor_1d(ctx, 0, 1 << 20); // GGML_TYPE_F32; data left as is
		void *b = ggml_new_tensor_1d(ctx, 0, 1 << 20);
		void *graph = ggml_new_graph(ctx);
		ggml_build_forward_expand(graph, ggml_add(ctx, ggml_mul(ctx, a, b), b));
		if (ggml_graph_compute_with_ctx(ctx, graph, 2) != 0) {
			fprintf(stderr, "churn: graph not computed\n");
			return 1;
		}
		ggml_free(ctx);
		usleep(200000);
	}
	printf("churned in %d processes\n", ROUNDS);
	return 0;
}
