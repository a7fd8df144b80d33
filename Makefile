# Thin front door; the real build is meson.build.
#   make run    build and start zeusd on TCP 127.0.0.1:4938 (simulated
#               devices when this machine has no NVIDIA driver)
#   make check  every test: unit + black-box, then again under ASan+UBSan
#   make bench  benchmarks (docs/performance.md)
BUILD ?= build
ASAN ?= build-asan

.PHONY: all deps run check bench clean fuzz

all: deps
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD) >/dev/null
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh build

run: all
	@scripts/run.sh $(BUILD)

check:
	@scripts/deps.sh test
	@scripts/check.sh

bench:
	@scripts/deps.sh bench
	@bench/run.sh

fuzz:
	@scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz
