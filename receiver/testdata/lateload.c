// lateload: a GGML process that loads libllama with dlopen after it started, as a
// binding does. It links GGML's CPU backend, so it is a GGML process from the start. Once
// the file load exists in the directory named by its third argument, it dlopens libllama
// (first argument); once decode exists there too, it registers the CPU backend beside
// libllama (a GGML_BACKEND_DL build's registry loads backends only when asked) and
// decodes eight single tokens with the model (second argument).
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama.h"

#define SYM(name)                                                          \
	__typeof__(&name) p_##name = (__typeof__(&name))dlsym(lib, #name); \
	if (!p_##name) {                                                   \
		fprintf(stderr, "lateload: no %s\n", #name);               \
		return 1;                                                  \
	}

// await waits until file name exists in directory dir.
static void await(const char *dir, const char *name) {
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	while (access(path, F_OK) != 0)
		usleep(10000);
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: lateload LIBLLAMA MODEL DIR\n");
		return 2;
	}
	ggml_cpu_init();
	await(argv[3], "load");
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "lateload: %s\n", dlerror());
		return 1;
	}
	SYM(llama_backend_init)
	SYM(llama_model_default_params)
	SYM(llama_model_load_from_file)
	SYM(llama_context_default_params)
	SYM(llama_init_from_model)
	SYM(llama_batch_get_one)
	SYM(llama_decode)
	SYM(llama_free)
	SYM(llama_model_free)
	await(argv[3], "decode");
	char cpu[4096];
	snprintf(cpu, sizeof(cpu), "%s/libggml-cpu.so", dirname(strdup(argv[1])));
	if (!ggml_backend_load(cpu)) {
		fprintf(stderr, "lateload: no CPU backend in %s\n", cpu);
		return 1;
	}
	p_llama_backend_init();
	struct llama_model *model = p_llama_model_load_from_file(argv[2], p_llama_model_default_params());
	if (!model)
		return 1;
	struct llama_context_params cp = p_llama_context_default_params();
	cp.n_ctx = 256;
	cp.n_threads = cp.n_threads_batch = 2;
	struct llama_context *ctx = p_llama_init_from_model(model, cp);
	if (!ctx)
		return 1;
	llama_token tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	for (int i = 0; i < 8; i++) {
		if (p_llama_decode(ctx, p_llama_batch_get_one(&tokens[i], 1)) != 0)
			return 1;
	}
	p_llama_free(ctx);
	p_llama_model_free(model);
	return 0;
}
