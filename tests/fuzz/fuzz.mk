# fuzz.mk - libFuzzer fuzzing of the image readers (tests/fuzz/fuzz_image.c).
#
#   make fuzz-smoke   FUZZ_SECONDS (30) of fuzzing; prints one "ok - " or
#                     "not ok - " line, as tests/run.sh counts them
#   make fuzz         the same, FUZZ_SECONDS defaulting to 600, for local runs
#   FUZZ_FLAGS=...    more libFuzzer flags (-jobs=4, -seed=1, -only_ascii=1 ...)
#
# Included from tests/tests.mk once B, CORE_SRCS, STATIC_LIBS, CUDA_HOME, Q and
# msg are defined.  The seed corpus is the cubins, fatbins and host objects
# that `make test` builds from tests/fixtures/params.cu, the Triton 3.6 cubin
# and every input in tests/fuzz/regressions (inputs that once crashed a
# reader; they replay first).  A run copies them into a temporary corpus, so
# the tree is never written; an input that fails is kept as
# $(B)/test/fuzz/{crash,leak,oom,timeout}-<sha1>, the log as
# $(B)/test/fuzz/fuzz_image.log.  Once the bug is fixed, copy the input (after
# `$(B)/test/fuzz_image -minimize_crash=1 -max_total_time=60 INPUT`) into
# tests/fuzz/regressions/.
#
# Needs clang with libFuzzer (Debian: clang and libclang-rt-<version>-dev);
# FUZZ_CC names another clang.  The readers are compiled here from
# $(CORE_SRCS) with the fuzzer's coverage and the sanitizers; the libraries
# they link are not instrumented.

FUZZ_CC ?= clang
FZ := $(B)/test/fuzz
FZ_FX := $(B)/test/fixtures
FUZZ_BIN := $(B)/test/fuzz_image
FUZZ_CFLAGS := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror \
	-I$(CUDA_HOME)/include
# Seeds: built by the fixture rules of tests/tests.mk.
FUZZ_SEEDS := $(addprefix $(FZ_FX)/,params.sm_86.cubin params.sm_90.cubin \
	params.sm_90a.cubin params.sm_120.cubin triton_like.cubin params.fatbin \
	params.zstd.fatbin params.lz4.fatbin params.o params_rdc.o) \
	tests/fixtures/triton36/mm_big.cubin
FUZZ_REGRESSIONS := $(wildcard tests/fuzz/regressions/*)
# Larger than every seed (the biggest fatbin is about 43 KiB).
FUZZ_MAX_LEN := 65536

$(FUZZ_BIN): tests/fuzz/fuzz_image.c $(CORE_SRCS) $(wildcard core/*/*.h) tests/fuzz/fuzz.mk
	$(msg) FUZZCC $@
	$(Q)command -v $(FUZZ_CC) >/dev/null 2>&1 || { \
	  echo "fuzz: '$(FUZZ_CC)' not found: libFuzzer needs clang (Debian:" \
	       "apt-get install clang libclang-rt-14-dev), or name one with FUZZ_CC=" >&2; \
	  exit 1; }
	$(Q)mkdir -p $(dir $@) && $(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ tests/fuzz/fuzz_image.c \
	  $(CORE_SRCS) $(STATIC_LIBS) -lcjson -ldl -lpthread || { \
	  echo "fuzz: building $@ failed; if the linker misses libclang_rt.fuzzer," \
	       "install libclang-rt-<clang version>-dev" >&2; exit 1; }

# fuzz_run SECONDS: fuzz from a fresh copy of the seeds, then print the verdict.
define fuzz_run
	$(Q)mkdir -p $(FZ) && corpus=$$(mktemp -d) && trap 'rm -rf "$$corpus"' EXIT && \
	cp $(FUZZ_SEEDS) $(FUZZ_REGRESSIONS) "$$corpus"/ && \
	log=$(FZ)/fuzz_image.log && \
	$(FUZZ_BIN) -max_total_time=$(1) -max_len=$(FUZZ_MAX_LEN) -timeout=25 \
	  -print_final_stats=1 -artifact_prefix=$(FZ)/ $(FUZZ_FLAGS) "$$corpus" >"$$log" 2>&1; \
	rc=$$?; \
	runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' "$$log" | tail -n 1); \
	[ -n "$$runs" ] || runs=$$(sed -n 's/^#\([0-9]*\).*/\1/p' "$$log" | tail -n 1); \
	if [ $$rc -eq 0 ]; then \
	  echo "ok - fuzz_image: $${runs:-0} runs, no crash"; \
	else \
	  crash=$$(sed -n 's/.*Test unit written to \(.*\)$$/\1/p' "$$log" | tail -n 1); \
	  echo "not ok - fuzz_image: exit $$rc after $${runs:-?} runs; input $${crash:-(none kept)}, log $$log"; \
	  grep -E '^(==[0-9]+== ?ERROR|SUMMARY|fuzz_image:|.*runtime error)' "$$log" | head -n 5 | sed 's/^/#   /'; \
	  exit 1; \
	fi
endef

.PHONY: fuzz fuzz-smoke
fuzz-smoke: FUZZ_SECONDS ?= 30
fuzz-smoke: $(FUZZ_BIN) $(FUZZ_SEEDS)
	$(call fuzz_run,$(FUZZ_SECONDS))

fuzz: FUZZ_SECONDS ?= 600
fuzz: $(FUZZ_BIN) $(FUZZ_SEEDS)
	$(call fuzz_run,$(FUZZ_SECONDS))
