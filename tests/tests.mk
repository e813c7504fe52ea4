# tests.mk - `make test` (no GPU), `make test-gpu`, `make bench-gpu`.
#
# Fixtures are built here by nvcc from tests/fixtures/*.cu; unit tests are
# cmocka programs built with AddressSanitizer and UBSan over the same sources
# as the shim; tests/run.sh runs them and the command-line checks and prints
# the closing "N passed, N failed" line.

T := $(B)/test
FX := $(T)/fixtures
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
PLAIN_CFLAGS := $(filter-out -fvisibility=hidden,$(CFLAGS))
TEST_CFLAGS := $(PLAIN_CFLAGS) $(SAN) -Wno-unused-parameter
NVFX := $(NVCC) -Ikernels -Xcudafe --diag_suppress=177
# Unit tests also compile $(ENGINE_SRCS) (defined in the Makefile: every engine/ source).

FIXTURES := $(FX)/params.sm_90.cubin $(FX)/params.sm_90a.cubin $(FX)/params.sm_120.cubin \
	$(FX)/params.sm_86.cubin $(FX)/params.fatbin $(FX)/params.zstd.fatbin \
	$(FX)/params.lz4.fatbin $(FX)/libparams.so $(FX)/params.o $(FX)/params_rdc.o \
	$(FX)/triton_cache $(FX)/empty_section.o $(FX)/sglang_extend.sm_90.cubin

UNIT_TESTS := $(patsubst tests/unit/%.c,$(T)/%,$(wildcard tests/unit/test_*.c))

$(FX)/params.sm_%.cubin: tests/fixtures/params.cu kernels/common.cuh $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -cubin -arch=sm_$* $< -o $@

GENCODE := -gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=[sm_120,compute_120]
$(FX)/params.fatbin: tests/fixtures/params.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -fatbin $(GENCODE) $< -o $@
$(FX)/params.zstd.fatbin: tests/fixtures/params.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -fatbin -Xfatbin=-compress-all --compress-mode=size $(GENCODE) $< -o $@
$(FX)/params.lz4.fatbin: tests/fixtures/params.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -fatbin -Xfatbin=-compress-all --compress-mode=speed $(GENCODE) $< -o $@
$(FX)/libparams.so: tests/fixtures/params.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -shared -Xcompiler -fPIC $(GENCODE) $< -o $@
$(FX)/params.o: tests/fixtures/params.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -c -Xfatbin=-compress-all $(GENCODE) $< -o $@
$(FX)/params_rdc.o: tests/fixtures/params.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -c -rdc=true -arch=sm_120 $< -o $@
$(FX)/sglang_extend.sm_90.cubin: tests/fixtures/sglang_extend.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -cubin -arch=sm_90 $< -o $@
$(FX)/triton_like.cubin: tests/fixtures/triton_like.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(FX) && $(NVFX) -cubin -arch=sm_90a $< -o $@
$(FX)/triton_cache: $(FX)/triton_like.cubin tests/scripts/make_triton_cache.sh
	$(Q)sh tests/scripts/make_triton_cache.sh $< $@ 106496

# A host object whose .nv_fatbin section is empty: nothing to scan, no error.
$(FX)/empty_section.o: $(B)/obj/core/common/err.o
	$(Q)mkdir -p $(FX) && objcopy --add-section .nv_fatbin=/dev/null $< $@

# Unit tests compile the core sources themselves, with the sanitizers
# (test_rules and test_admit also the rules table compiled from rules/).
$(T)/test_rules $(T)/test_admit: EXTRA_TEST_SRCS := $(RULES_TABLE)
$(T)/test_rules $(T)/test_admit: $(RULES_TABLE)
# test_reroute, test_context, test_inkling and test_lightning (the extend,
# decode and fused-MoE rules; sglang-context-attention, sglang-inkling-moe,
# lightning-kv-parallel): the rules table and the fake launch they hand to
# reroute_select (tests/unit/fake_launch.c).
FAKE_LAUNCH_TESTS := $(T)/test_reroute $(T)/test_context $(T)/test_inkling $(T)/test_lightning
$(FAKE_LAUNCH_TESTS): EXTRA_TEST_SRCS := $(RULES_TABLE) tests/unit/fake_launch.c
$(FAKE_LAUNCH_TESTS): $(RULES_TABLE) tests/unit/fake_launch.c tests/unit/fake_launch.h
# test_scan walks files: the tool's half of the image reader.
$(T)/test_scan: EXTRA_TEST_SRCS := tools/sm120/scan_files.c
$(T)/test_scan: tools/sm120/scan_files.c
$(T)/test_%: tests/unit/test_%.c tests/unit/fixture.h $(CORE_SRCS) $(STATE_TEST_SRCS) $(ENGINE_SRCS) $(B)/.deps-ok
	$(msg) CC $@
	$(Q)mkdir -p $(T) && $(CC) $(TEST_CFLAGS) -I$(CUDA_HOME)/include -Icore -o $@ $< \
	  $(CORE_SRCS) $(STATE_TEST_SRCS) $(ENGINE_SRCS) $(EXTRA_TEST_SRCS) $(STATIC_LIBS) -lcjson -lcmocka -ldl -lpthread -lm

# Interception tests: a fake libcuda.so.1 and programs that reach it every way
# a real process does (tests/shim, run by tests/scripts/test_intercept.sh).
FAKE_DIR := $(T)/fakecuda
SHIM_TEST_BINS := $(FAKE_DIR)/libcuda.so.1 $(T)/shim_paths $(T)/shim_ctor $(T)/shim_next \
	$(T)/shim_reroute \
	$(T)/shim_limits
$(FAKE_DIR)/libcuda.so.1: tests/shim/fakecuda.c $(B)/.deps-ok
	$(msg) CC $@
	$(Q)mkdir -p $(FAKE_DIR) && $(CC) $(CFLAGS) -I$(CUDA_HOME)/include -shared \
	  -Wl,-soname,libcuda.so.1 -o $@ $<
$(T)/shim_paths: tests/shim/paths.c $(FAKE_DIR)/libcuda.so.1
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -I$(CUDA_HOME)/include -o $@ $< $(FAKE_DIR)/libcuda.so.1 -ldl -lpthread
$(T)/shim_reroute: tests/shim/reroute.c $(FAKE_DIR)/libcuda.so.1
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -I$(CUDA_HOME)/include -o $@ $< $(FAKE_DIR)/libcuda.so.1
$(T)/shim_limits: tests/shim/limits.c $(FAKE_DIR)/libcuda.so.1
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -I$(CUDA_HOME)/include -o $@ $< $(FAKE_DIR)/libcuda.so.1
# SM120SHIM_EMULATE_OCCUPANCY (tests/scripts/test_occupancy.sh)
SHIM_TEST_BINS += $(T)/shim_occupancy
$(T)/shim_occupancy: tests/shim/occupancy.c $(FAKE_DIR)/libcuda.so.1
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -I$(CUDA_HOME)/include -o $@ $< $(FAKE_DIR)/libcuda.so.1
$(T)/libctor.so: tests/shim/ctor_lib.c $(FAKE_DIR)/libcuda.so.1
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -I$(CUDA_HOME)/include -shared -o $@ $< $(FAKE_DIR)/libcuda.so.1 -ldl
$(T)/shim_ctor: tests/shim/ctor_main.c $(T)/libctor.so
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -o $@ $< $(T)/libctor.so -Wl,-rpath-link,$(FAKE_DIR)
$(T)/libnext_b.so: tests/shim/next_b.c
	$(Q)mkdir -p $(T) && $(CC) $(PLAIN_CFLAGS) -shared -Wl,-soname,libnext_b.so -o $@ $<
$(T)/libnext_a.so: tests/shim/next_a.c $(T)/libnext_b.so
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -shared -Wl,-soname,libnext_a.so -o $@ $< \
	  -Wl,--no-as-needed -L$(T) -lnext_b -ldl
$(T)/shim_next: tests/shim/next_main.c $(T)/libnext_a.so
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -o $@ $< -L$(T) -lnext_a -Wl,-rpath-link,$(T)

# The library class (tests/scripts/test_library.sh): a program that loads
# each kind of image, and copies of a loader library whose .nv_fatbin holds
# sm_120 code (params.fatbin) or sm_90 code only (params90.fatbin).
FIXTURES += $(FX)/params90.fatbin
SHIM_TEST_BINS += $(T)/shim_library $(T)/libloader120.so $(T)/libloader90.so
$(FX)/params90.fatbin: $(FX)/params.sm_90.cubin
	$(msg) FATBIN $@
	$(Q)$(FATBINARY) -64 --create=$@ --image3=kind=elf,sm=90,file=$<
$(T)/shim_library: tests/shim/library.c $(FAKE_DIR)/libcuda.so.1
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -I$(CUDA_HOME)/include -o $@ $< $(FAKE_DIR)/libcuda.so.1 -ldl
$(T)/libloader%.so: tests/shim/loader_lib.c $(FX)/params%.fatbin $(FAKE_DIR)/libcuda.so.1
	$(msg) CC $@
	$(Q)$(CC) $(PLAIN_CFLAGS) -I$(CUDA_HOME)/include -shared -o $@.tmp $< $(FAKE_DIR)/libcuda.so.1 && \
	  objcopy --add-section .nv_fatbin=$(FX)/params$*.fatbin $@.tmp $@ && rm -f $@.tmp
$(FX)/params120.fatbin: $(FX)/params.fatbin
	$(Q)cp $< $@

# The fuzz smoke (tests/fuzz/fuzz.mk) runs inside tests/run.sh so that its
# verdict is counted in the closing line.
FUZZ_TEST_SECONDS ?= 20
test: all $(FIXTURES) $(UNIT_TESTS) $(SHIM_TEST_BINS) $(FUZZ_BIN) oracle
	$(Q)SM120_FIXTURES=$(FX) SM120_BUILD=$(B) \
	  SM120_FUZZ="$(MAKE) --no-print-directory -s fuzz-smoke FUZZ_SECONDS=$(FUZZ_TEST_SECONDS)" \
	  sh tests/run.sh $(UNIT_TESTS)

include tests/fuzz/fuzz.mk

# ------------------------------------------------------------------ GPU
GPU_TESTS := $(T)/gpu_decode_merge $(T)/gpu_decode_attn $(T)/gpu_extend_attn $(T)/gpu_moe_gemm
# lightning_kv against a double reference (tests/gpu/lightning_kv.c)
GPU_TESTS += $(T)/gpu_lightning_kv
GPU_BENCH := $(T)/gpu_bench_launch $(T)/gpu_bench_peaks $(T)/bench_peaks.cubin $(T)/gpu_bench_moe_decode \
	$(T)/fp8_mma_proxy.fatbin
GPU_SHIMMED := $(T)/gpu_reroute_contexts $(T)/framework_stage1.cubin
$(T)/framework_stage1.cubin: tests/gpu/framework_stage1.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(T) && $(NVCC) -O3 -cubin -arch=sm_90 -Xcudafe --diag_suppress=177 $< -o $@
$(T)/bench_peaks.cubin: tests/gpu/bench_peaks.cu $(B)/.deps-ok
	$(msg) NVCC $@
	$(Q)mkdir -p $(T) && $(NVCC) -O3 -cubin -arch=sm_90 $< -o $@
# The bundled kernels with sm_90's FP8 MMA emulation replaced by one f16 MMA (primitives.cuh's
# MOE_FP8_MMA_PROXY: SM120's MMA count, wrong sums), timed beside the bundle by bench.sh
# (gpu_bench_moe_decode's ALT); sm_120's image is the bundle's own.  Spills are allowed here:
# ptxas spills 12 bytes in the proxy's moe_gemm_fp8_d128 (a spill only slows the proxy).
$(T)/fp8_mma_proxy.sm_90.cubin: $(B)/kernels/bundle.cu $(KERNEL_HDRS) $(B)/.deps-ok
	$(msg) NVCC "sm_90 kernels, FP8 MMA proxy"
	$(Q)mkdir -p $(T) && $(NVCC) -O3 -std=c++17 -DMOE_FP8_MMA_PROXY -cubin -arch=sm_90 -Ikernels $< -o $@
$(T)/fp8_mma_proxy.fatbin: $(T)/fp8_mma_proxy.sm_90.cubin $(B)/kernels/bundle.sm_120.cubin
	$(msg) FATBIN $@
	$(Q)$(FATBINARY) -64 --create=$@ --image3=kind=elf,sm=90,file=$< \
	  --image3=kind=elf,sm=120,file=$(B)/kernels/bundle.sm_120.cubin
$(T)/gpu_%: tests/gpu/%.c $(B)/libcore.a $(SHIM_OBJS) $(B)/.deps-ok
	$(msg) CC $@
	$(Q)mkdir -p $(T) && $(CC) $(PLAIN_CFLAGS) -I$(CUDA_HOME)/include \
	  -o $@ $< $(B)/obj/shim/reroute/bundle.o $(B)/obj/shim/reroute/bundle_S.o \
	  $(B)/libcore.a -L$(CUDA_HOME)/lib64/stubs -lcuda -lm

# The frameworks' released kernel files (tests/oracle/packages.txt), fetched
# from the Python package registry; carry $(B)/oracle to a GPU machine without
# one.  Triton (tests/oracle/requirements.txt) in a venv of its own compiles
# them for sm_120 and sm_90 without a GPU (tests/scripts/test_oracle_cli.sh).
ORACLE_VENV := $(B)/oracle-venv
$(ORACLE_VENV)/.ok: tests/oracle/requirements.txt
	$(msg) PIP "$(ORACLE_VENV): $$(grep -v '^#' $<)"
	$(Q)rm -rf $(ORACLE_VENV) && python3 -m venv $(ORACLE_VENV) && \
	  $(ORACLE_VENV)/bin/pip install -q --disable-pip-version-check -r $< && touch $@

oracle: $(ORACLE_VENV)/.ok
	$(Q)sh tests/oracle/fetch.sh $(B)/oracle

# make test builds (does not run) the GPU programs, so a change that breaks
# them fails where there is no GPU too.
test: $(GPU_TESTS) $(GPU_BENCH) $(GPU_SHIMMED)

gpu-build: all $(GPU_TESTS) $(GPU_BENCH) $(GPU_SHIMMED) oracle
.PHONY: gpu-build oracle

test-gpu: gpu-build
	$(Q)SM120_BUILD=$(B) sh tests/gpu/run.sh $(GPU_TESTS)

bench-gpu: gpu-build
	$(Q)SM120_BUILD=$(B) sh tests/gpu/bench.sh
