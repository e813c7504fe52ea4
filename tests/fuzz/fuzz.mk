# fuzz.mk - libFuzzer fuzzing of the readers of untrusted input, one target
# (tests/fuzz/fuzz_TARGET.c, built as $(B)/test/fuzz_TARGET) each:
#   image        the image readers: cubins, fatbins, host ELF, PTX (core/image)
#   safetensors  a safetensors file, and a sharded checkpoint with its
#                model.safetensors.index.json (engine/st)
#   config       config.json and hf_quant_config.json (engine/model/config.c)
#   jsonl        the shim's JSON-lines logs as `sm120 report` and `sm120 route`
#                read them (tools/sm120/jsonl.c)
#
#   make fuzz-smoke   FUZZ_SECONDS (30) of fuzzing for each target; prints one
#                     "ok - fuzz_TARGET" or "not ok - fuzz_TARGET" line per
#                     target, as tests/run.sh counts them (make test: 5 s each,
#                     FUZZ_TEST_SECONDS below)
#   make fuzz         the same, FUZZ_SECONDS defaulting to 600, for local runs
#   FUZZ_TARGETS=...  some of the targets (make fuzz FUZZ_TARGETS="config jsonl")
#   FUZZ_FLAGS=...    more libFuzzer flags (-jobs=4, -seed=1, -runs=N ...)
#
# Included from tests/tests.mk once B, CORE_SRCS, STATIC_LIBS, CUDA_HOME, Q and
# msg are defined.  tests/fuzz/fuzz_run.sh runs one target: from a temporary
# copy of its seeds (the tree is never written), its regressions first (inputs
# that once failed; each target replays its own), and prints the verdict.
# Seeds:
#   image        the cubins, fatbins and host objects that `make test` builds
#                from tests/fixtures/params.cu, and the Triton 3.6 cubin
#   safetensors  headers and a sharded index of tiny checkpoints that
#   config       `sm120 ref make-model` writes (tests/fuzz/make_seeds.sh, into
#                $(B)/test/fuzz/seeds), and tests/fuzz/seeds/TARGET/
#   jsonl        tests/fuzz/seeds/jsonl/: hand-written log lines
# Regressions: tests/fuzz/regressions/TARGET/ (the image target's also the
# files directly in tests/fuzz/regressions/, from before there were others).
# A failing input is kept as $(B)/test/fuzz/TARGET-{crash,leak,oom,timeout}-<sha1>,
# the log as $(B)/test/fuzz/fuzz_TARGET.log.  Once the bug is fixed, copy the
# input (after `$(B)/test/fuzz_TARGET -minimize_crash=1 -max_total_time=60
# INPUT`) into tests/fuzz/regressions/TARGET/.
#
# Needs clang with libFuzzer (Debian: clang and libclang-rt-<version>-dev);
# FUZZ_CC names another clang.  The code under test is compiled here with the
# fuzzer's coverage and the sanitizers; the libraries it links are not
# instrumented.

FUZZ_CC ?= clang
FZ := $(B)/test/fuzz
FZ_FX := $(B)/test/fixtures
FUZZ_ALL := image safetensors config jsonl
FUZZ_TARGETS ?= $(FUZZ_ALL)
# Every target's binary (tests.mk builds them for `make test`).
FUZZ_BIN := $(FUZZ_ALL:%=$(B)/test/fuzz_%)
FUZZ_CFLAGS := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror \
	-I$(CUDA_HOME)/include

# make test's fuzzing: 5 s for each of the four targets, the 20 s it gave the
# image target alone (tests.mk's default; a value from the command line or
# the environment stands).
ifeq ($(origin FUZZ_TEST_SECONDS),file)
FUZZ_TEST_SECONDS := 5
endif

# What each target compiles besides tests/fuzz/fuzz_TARGET.c, and links.
FUZZ_SRCS_image := $(CORE_SRCS)
FUZZ_SRCS_safetensors := engine/st/safetensors.c core/common/err.c core/common/file.c
FUZZ_SRCS_config := engine/model/config.c core/common/err.c core/common/file.c
FUZZ_SRCS_jsonl := tools/sm120/jsonl.c core/common/err.c
FUZZ_LIBS_image := $(STATIC_LIBS) -lcjson -ldl -lpthread
FUZZ_LIBS_safetensors := -lcjson
FUZZ_LIBS_config := -lcjson -lm
FUZZ_LIBS_jsonl := -lcjson

# Seeds (files, or folders whose files are taken) and regressions.
FUZZ_SEEDS_image := $(addprefix $(FZ_FX)/,params.sm_86.cubin params.sm_90.cubin \
	params.sm_90a.cubin params.sm_120.cubin triton_like.cubin params.fatbin \
	params.zstd.fatbin params.lz4.fatbin params.o params_rdc.o) \
	tests/fixtures/triton36/mm_big.cubin
FUZZ_REGRESSIONS_image := tests/fuzz/regressions tests/fuzz/regressions/image
FUZZ_GEN_SEEDS := $(FZ)/seeds/.stamp
FUZZ_SEEDS_safetensors := $(FZ)/seeds/safetensors tests/fuzz/seeds/safetensors
FUZZ_SEEDS_config := $(FZ)/seeds/config tests/fuzz/seeds/config
FUZZ_SEEDS_jsonl := tests/fuzz/seeds/jsonl
FUZZ_REGRESSIONS_safetensors := tests/fuzz/regressions/safetensors
FUZZ_REGRESSIONS_config := tests/fuzz/regressions/config
FUZZ_REGRESSIONS_jsonl := tests/fuzz/regressions/jsonl
# Larger than every seed and regression (the biggest, a fatbin, is about 43 KiB).
FUZZ_MAX_LEN_image := 65536
FUZZ_MAX_LEN_safetensors := 16384
FUZZ_MAX_LEN_config := 8192
FUZZ_MAX_LEN_jsonl := 8192

# The prerequisites a run of the targets in $(FUZZ_TARGETS) needs.
FUZZ_NEEDS := $(FUZZ_TARGETS:%=$(B)/test/fuzz_%) \
	$(if $(filter image,$(FUZZ_TARGETS)),$(FUZZ_SEEDS_image)) \
	$(if $(filter safetensors config,$(FUZZ_TARGETS)),$(FUZZ_GEN_SEEDS))

# fuzz_target T: the rule that builds $(B)/test/fuzz_T.
define fuzz_target
$(B)/test/fuzz_$(1): tests/fuzz/fuzz_$(1).c tests/fuzz/fuzz_util.h $(FUZZ_SRCS_$(1)) \
		$(sort $(foreach s,$(FUZZ_SRCS_$(1)),$(wildcard $(dir $(s))*.h))) tests/fuzz/fuzz.mk
	$$(msg) FUZZCC $$@
	$$(Q)command -v $$(FUZZ_CC) >/dev/null 2>&1 || { \
	  echo "fuzz: '$$(FUZZ_CC)' not found: libFuzzer needs clang (Debian:" \
	       "apt-get install clang libclang-rt-14-dev), or name one with FUZZ_CC=" >&2; \
	  exit 1; }
	$$(Q)mkdir -p $$(dir $$@) && $$(FUZZ_CC) $$(FUZZ_CFLAGS) -o $$@ $$< \
	  $(FUZZ_SRCS_$(1)) $(FUZZ_LIBS_$(1)) || { \
	  echo "fuzz: building $$@ failed; if the linker misses libclang_rt.fuzzer," \
	       "install libclang-rt-<clang version>-dev" >&2; exit 1; }
endef
$(foreach t,$(FUZZ_ALL),$(eval $(call fuzz_target,$(t))))

$(FUZZ_GEN_SEEDS): $(B)/sm120 tests/fuzz/make_seeds.sh
	$(msg) SEEDS $(FZ)/seeds
	$(Q)sh tests/fuzz/make_seeds.sh $(B)/sm120 $(FZ)/seeds && touch $@

# fuzz_run SECONDS: every target of $(FUZZ_TARGETS) in turn, each with its
# verdict line; fails when one failed.
define fuzz_run
	$(Q)fail=0; $(foreach t,$(FUZZ_TARGETS),sh tests/fuzz/fuzz_run.sh $(t) $(B)/test/fuzz_$(t) \
	  $(FZ) $(1) $(FUZZ_MAX_LEN_$(t)) "$(FUZZ_FLAGS)" $(FUZZ_SEEDS_$(t)) \
	  $(FUZZ_REGRESSIONS_$(t)) || fail=1;) exit $$fail
endef

.PHONY: fuzz fuzz-smoke
fuzz-smoke: FUZZ_SECONDS ?= 30
fuzz-smoke: $(FUZZ_NEEDS)
	$(call fuzz_run,$(FUZZ_SECONDS))

fuzz: FUZZ_SECONDS ?= 600
fuzz: $(FUZZ_NEEDS)
	$(call fuzz_run,$(FUZZ_SECONDS))
