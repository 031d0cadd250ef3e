# prefixd — every target runs inside the build environment (scripts/in-env): natively where the
# host has libllama, else inside the machine-wide Debian sid root.
SHELL := /bin/bash
IN_ENV := scripts/in-env
BUILD ?= build
JOBS ?= $(shell nproc)
HOST ?= 127.0.0.1
PORT ?= 8080
MODEL ?= models/default.gguf
DEFAULT_PRESET ?= qwen2-0.5b

.PHONY: all build test browser test-asan serve model bench bench-families microbench fuzz fuzz-build fuzz-seeds soak clean env shell deb deb-test

all: build

env:
	@scripts/env-root >/dev/null

$(BUILD)/build.ninja: CMakeLists.txt | env
	$(IN_ENV) cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: $(BUILD)/build.ninja
	$(IN_ENV) cmake --build $(BUILD) -j $(JOBS)

test: build browser
	$(IN_ENV) bash -c 'cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600'

# The web UI's browser test drives Debian's Chromium on the host (tests/browser/chromium.sh says
# how it is reached from the build root); it is installed here when missing.
browser:
	@command -v chromium >/dev/null || { echo "installing Debian's chromium on the host for the browser test"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get install -y -qq chromium >/dev/null 2>&1 || { $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }; }

build-asan/build.ninja: CMakeLists.txt | env
	$(IN_ENV) cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPREFIXD_SANITIZE=ON

test-asan: build-asan/build.ninja
	$(IN_ENV) cmake --build build-asan -j $(JOBS)
	$(IN_ENV) bash -c 'cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) --timeout 900'

$(MODEL): | build
	@mkdir -p $(dir $(MODEL))
	$(IN_ENV) $(BUILD)/bin/prefixd-mkmodel --preset $(DEFAULT_PRESET) --out $(MODEL)

model: build $(MODEL)

serve: build $(MODEL)
	@echo "prefixd: serving $(MODEL) on http://$(HOST):$(PORT) — try:"
	@echo "  curl http://$(HOST):$(PORT)/v1/chat/completions -H 'Content-Type: application/json' \\"
	@echo "    -d '{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":16}'"
	@echo "  or open http://$(HOST):$(PORT)/ in a browser (chat) and http://$(HOST):$(PORT)/cache (the cache)"
	$(IN_ENV) $(BUILD)/bin/prefixd serve --model $(MODEL) --host $(HOST) --port $(PORT) $(ARGS)

# prefixd vs llama-server side by side (docs/benchmarks.md), then on the hybrid, sliding-window and
# recurrent tiny models (docs/benchmarks-families.md); BENCH_SCALE=4 for the full sizes. The script
# runs prefixd-bench and prefixd-mkmodel from the folder of BENCH_PREFIXD.
bench: build $(MODEL)
	$(IN_ENV) env BENCH_PREFIXD=$(BUILD)/bin/prefixd MODEL=$(MODEL) bench/run.sh

# The second part alone: the family models (generated into models/ when missing), a few minutes.
bench-families: build
	$(IN_ENV) env BENCH_PREFIXD=$(BUILD)/bin/prefixd BENCH_PARTS=families bench/run.sh

# Prompt-cache microbenchmarks (bench/micro): lookup latency at 100k entries, host restore bandwidth.
MICRO_MODEL := $(BUILD)/models/tiny.gguf

$(MICRO_MODEL): | build
	@mkdir -p $(dir $(MICRO_MODEL))
	$(IN_ENV) $(BUILD)/bin/prefixd-mkmodel --preset tiny --out $(MICRO_MODEL) --quiet

microbench: build $(MICRO_MODEL)
	$(IN_ENV) env PREFIXD_MICRO_MODEL=$(MICRO_MODEL) $(BUILD)/bin/prefixd_micro --benchmark_counters_tabular=true $(ARGS)

# The Debian package (debian/): build-deb/prefixd_VERSION_ARCH.deb, built in the build root by
# dpkg-buildpackage with debhelper (the programs alone, Debian's build flags). deb-test checks it and
# installs it into a fresh sid root (tests/deb/run.sh).
deb: env
	$(IN_ENV) sh -c 'dpkg-buildpackage -b -us -uc -j$(JOBS) && mkdir -p build-deb && mv ../prefixd_*.deb ../prefixd-dbgsym_*.deb ../prefixd_*.buildinfo ../prefixd_*.changes build-deb/'

deb-test: deb build
	tests/deb/run.sh build-deb $(BUILD)/models/tiny.gguf

# Fuzzing (fuzz/): a separate clang build with libFuzzer, ASan and UBSan in build-fuzz/; every
# target runs FUZZ_SECONDS on a fresh copy of its seed corpus and any crash or sanitizer report
# fails (docs/operator-guide.md, "Fuzzing").
FUZZ_SECONDS ?= 60

build-fuzz/build.ninja: CMakeLists.txt fuzz/CMakeLists.txt | env
	$(IN_ENV) cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPREFIXD_FUZZ=ON \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++

fuzz-build: build-fuzz/build.ninja
	$(IN_ENV) cmake --build build-fuzz -j $(JOBS)

fuzz: fuzz-build
	$(IN_ENV) env FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh build-fuzz

# Rewrites the seed corpora (fuzz/corpus/) with the project's own encoders; commit the result.
fuzz-seeds: build
	rm -rf fuzz/corpus
	$(IN_ENV) $(BUILD)/bin/prefixd_fuzz_seeds fuzz/corpus

# Soak test: SOAK_CLIENTS clients for SOAK_SECONDS against one `prefixd serve` of SOAK_MODEL, its RSS
# sampled every second against the configured budgets; summary, results and a plot in SOAK_OUT
# (docs/operator-guide.md, "Soak test"). The tiny model, whose budgets are scaled down so that they
# bind: the default model answers about 0.2 requests per second on 2 CPUs, too few to soak with.
# For the default model: make soak SOAK_MODEL=models/default.gguf SOAK_ARGS=
SOAK_SECONDS ?= 1800
SOAK_CLIENTS ?= 16
SOAK_MODEL ?= $(BUILD)/models/tiny.gguf
SOAK_ARGS ?= --cache-mib 16 --snapshot-mib 4 --margin-mib 384 --threads 1
SOAK_OUT ?= bench/out/soak

# Then the exactness property test over many drawn configurations, with a new seed each run (the
# seed is printed, and named in any failure: EXACTNESS_SEED=N reruns it), some of them with every
# layer on lavapipe (--deterministic on the dense preset; EXACTNESS_GPU=0 leaves them out).
EXACTNESS_DRAWS ?= 200
EXACTNESS_GPU ?= 1
EXACTNESS_SEED ?= $(shell date +%s)

soak: build
	$(IN_ENV) $(BUILD)/bin/prefixd-bench soak --model $(SOAK_MODEL) --seconds $(SOAK_SECONDS) --clients $(SOAK_CLIENTS) \
	  --out $(SOAK_OUT) $(SOAK_ARGS) $(ARGS)
	$(IN_ENV) env PREFIXD_EXACTNESS_SEED=$(EXACTNESS_SEED) PREFIXD_EXACTNESS_DRAWS=$(EXACTNESS_DRAWS) PREFIXD_EXACTNESS_GPU=$(EXACTNESS_GPU) \
	  $(BUILD)/bin/prefixd_integration_tests --gtest_filter='Exactness.*'

shell: | env
	$(IN_ENV) bash

clean:
	rm -rf $(BUILD) build-asan build-fuzz
