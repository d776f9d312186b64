# A thin front for meson.  `make demo` and `make test` install what is missing
# (Debian packages, with apt-get), configure build/, compile and run.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
PACKAGES   := meson ninja-build pkg-config gcc libopenblas-dev uthash-dev \
              libcriterion-dev zlib1g-dev libpng-dev libcairo2-dev libgraphviz-dev \
              libprotobuf-c-dev protobuf-c-compiler libonnx-dev python3-onnx nodejs \
              libopenmpi-dev openmpi-bin dataset-fashion-mnist cmake
# PyTorch, the oracle of the tests that run it live (the ONNX export of
# examples/dcgan_torch.py, the goldens' script) and the peer of the benchmarks.
TORCH_PACKAGES := python3-torch
# The browser test (tests/browser): skipped, with the reason, where Chromium
# cannot be installed.
BROWSER_PACKAGES := chromium
# Extra packages only `make demo` needs (the data set; tests/test_fid.c reads
# it too, so it is in PACKAGES as well).
DEMO_PACKAGES := dataset-fashion-mnist
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps torch-deps build demo node-deps test test-minimal test-asan test-tsan test-isa check-clang check bench goldens clean

all: build

# $(call install_missing,PACKAGES): apt-get install those not installed yet.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call install_missing,$(PACKAGES))

torch-deps:
	$(call install_missing,$(TORCH_PACKAGES))

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	$(call install_missing,$(DEMO_PACKAGES))
	$(BUILD)/examples/dcgan/dcgan --out out --overwrite
	@echo "FID of 10000 samples against the test set, and real vs real (docs/fid.md):"
	$(BUILD)/tools/tapegrad fid test out/generator.safetensors train:10000 > out/fid.txt
	@cat out/fid.txt

# The tests' Node packages: ONNX Runtime (tests/onnx) and playwright-core
# (tests/browser).  --ignore-scripts keeps onnxruntime's bundled CPU library
# and skips download steps that cannot work here.  npm: Debian's package,
# unless the installed nodejs already brings it.
node-deps: deps
	$(call install_missing,$(if $(shell command -v npm),,npm))
	cd tests/onnx && npm ci --ignore-scripts --no-audit --no-fund
	cd tests/browser && npm ci --ignore-scripts --no-audit --no-fund

test: build node-deps torch-deps
	@command -v chromium >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y -qq $(BROWSER_PACKAGES); } || \
	  echo "could not install $(BROWSER_PACKAGES): the browser test will be skipped"
	scripts/run_tests.sh $(BUILD)

# The library without libpng and cairo (-Dpng=disabled -Dplot=disabled), built
# as a meson subproject of a small program (tests/consumer) that runs against
# it: one compile of the library, no Criterion.
test-minimal: deps
	scripts/test_install.sh --subproject

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false

# The suite in a sanitizer build, then every public function called with bad
# arguments (scripts/api_sweep.py; meson already needs python3).
test-asan: deps node-deps torch-deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	scripts/run_tests.sh $(ASAN_BUILD)
	python3 scripts/api_sweep.py --build $(ASAN_BUILD)

$(TSAN_BUILD)/build.ninja:
	meson setup $(TSAN_BUILD) -Db_sanitize=thread

# ThreadSanitizer (Criterion's runner does not run under it): two application
# threads on shared parameters (tests/threads.c), then training steps of the
# DCGAN in f32, bf16 and f16 with the worker pool at 2 threads.  Any data
# race report fails (halt_on_error).  Not part of `make test`.
test-tsan: deps $(TSAN_BUILD)/build.ninja
	ninja -C $(TSAN_BUILD) tests/test_threads bench/dcgan_step
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/test_threads
	for amp in f32 bf16 f16; do \
	  TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/bench/dcgan_step --threads 2 --batch 16 \
	    --steps 2 --warmup 1 $$( [ $$amp = f32 ] || echo --amp $$amp ) >/dev/null || exit 1; \
	done

# The suite again with the vector kernels bounded to what an AVX2-only CPU
# runs, then to plain C (TG_MAX_ISA), so that a machine with AVX-512 or AMX
# also tests the narrower paths end to end.  Not part of `make test`.
test-isa: build node-deps torch-deps
	TG_MAX_ISA=avx2 scripts/run_tests.sh $(BUILD)
	TG_MAX_ISA=portable scripts/run_tests.sh $(BUILD)

# The library compiled by clang too (the fuzzer's compiler, docs/fuzzing.md),
# which refuses some things gcc lets pass.  Compiles, runs nothing.
CLANG_BUILD ?= build-clang
check-clang: deps
	$(call install_missing,clang)
	[ -f $(CLANG_BUILD)/build.ninja ] || CC=clang meson setup $(CLANG_BUILD)
	ninja -C $(CLANG_BUILD) libtapegrad.a

check: test test-asan

REL_BUILD ?= build-rel

# The results table of the README, in a release build: the DCGAN training step,
# the conv layers against PyTorch and OpenBLAS sgemm, AMP, int8, pooling, cumsum,
# indexing, softmax, sums and the element-wise ops (about 20 min).
bench: deps torch-deps
	[ -f $(REL_BUILD)/build.ninja ] || meson setup $(REL_BUILD) -Dbuildtype=release
	ninja -C $(REL_BUILD)
	/usr/bin/python3 bench/dcgan_step.py --ours $(REL_BUILD)/bench/dcgan_step --threads 2 --steps 10 --rounds 5
	/usr/bin/python3 bench/compare.py --build $(REL_BUILD) --repeat 10 --rounds 3 --markdown bench/results.md
	/usr/bin/python3 bench/amp_dcgan.py --ours $(REL_BUILD)/bench/dcgan_step --threads 2 --rounds 12
	/usr/bin/python3 bench/int8.py --build $(REL_BUILD) --repeat 20 --rounds 3
	/usr/bin/python3 bench/pool.py --build $(REL_BUILD) --rounds 5
	/usr/bin/python3 bench/indexing.py --build $(REL_BUILD) --rounds 3
	/usr/bin/python3 bench/rows.py --build $(REL_BUILD) --rounds 3
	/usr/bin/python3 bench/pointwise.py --build $(REL_BUILD) --rounds 3
	/usr/bin/python3 bench/ctc.py --build $(REL_BUILD) --rounds 3
	/usr/bin/python3 bench/linalg.py --build $(REL_BUILD) --rounds 3

goldens: torch-deps
	/usr/bin/python3 scripts/make_goldens.py

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(REL_BUILD)
