# mapsync: a persistent-memory DAX workbench.  `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

KERNEL  ?= patched# patched | stock: the kernel `test`, `run` and `shell` boot
KSRC    ?=# a kernel tree of your own: configured with mapsync.config, built out of tree, tested
BZIMAGE ?=# a kernel image built elsewhere (the config it needs: docs/design.md, "The guest kernel")
ROLE    ?= plain# with KSRC or BZIMAGE: plain (no expected failures), patched or stock
KCONFIG ?= default# default | debug (lockdep, KFENCE, DEBUG_VM) | gdb (debug info, for --gdb)
TARBALL ?= /usr/src/linux-source-6.12.tar.xz
export MAPSYNC_TARBALL := $(TARBALL)

ifeq ($(filter $(KERNEL),patched stock),)
$(error KERNEL=$(KERNEL): patched or stock; a kernel of your own: KSRC=<kernel tree> or BZIMAGE=<image>)
endif
ifneq ($(KSRC),)
ifneq ($(BZIMAGE),)
$(error KSRC and BZIMAGE: give one of them)
endif
ifeq ($(wildcard $(KSRC)/Makefile $(KSRC)/Kconfig),)
$(error KSRC=$(KSRC): no kernel tree there (no Makefile and Kconfig))
endif
endif
ifneq ($(BZIMAGE),)
ifeq ($(wildcard $(BZIMAGE)),)
$(error BZIMAGE=$(BZIMAGE): no such file)
endif
endif
ifeq ($(filter $(ROLE),plain patched stock),)
$(error ROLE=$(ROLE): plain, patched or stock)
endif
ifeq ($(filter $(KCONFIG),default debug gdb),)
$(error KCONFIG=$(KCONFIG): use KCONFIG=default, debug or gdb)
endif

B        := build
DBG       = $(if $(filter-out default,$(KCONFIG)),-$(KCONFIG))
KOBJ      = $(KERNEL)$(DBG)
# the kernel a one-kernel target boots: a tree of your own, an image, or ours
TREEOBJ   = $(B)/kernel/tree-$(subst /,_,$(patsubst /%,%,$(abspath $(KSRC))))$(DBG)
KIMAGE    = $(if $(KSRC),$(TREEOBJ)/bzImage,$(if $(BZIMAGE),$(abspath $(BZIMAGE)),$(B)/kernel/$(KOBJ)/bzImage))
KROLE     = $(if $(KSRC)$(BZIMAGE),--role $(ROLE))
INITRD   := $(B)/rootfs/initramfs.cpio.gz
HTREE     = $(B)/kernel/src-$(KERNEL)/linux-source-6.12# whose kselftest_harness.h the tests use
HIMAGE    = $(B)/kernel/$(KOBJ)/bzImage# built (unpacked) with it
PATCHES  := $(shell sed -e 's/\#.*//' -e '/^[[:space:]]*$$/d' kernel-patches/series 2>/dev/null | sed 's|^|kernel-patches/|')
KDEPS    := kernel-patches/build-kernel.sh kernel-patches/mapsync.config \
            $(if $(filter-out default,$(KCONFIG)),kernel-patches/$(KCONFIG).config) $(TARBALL)

DEB_PKGS := linux-source-6.12 qemu-system-x86 ndctl daxctl xfsprogs e2fsprogs \
            libpmem2-dev libpmem-dev pmdk-tools busybox-static cpio bc flex bison \
            libelf-dev libssl-dev gnuplot-nox build-essential xz-utils file fio \
            util-linux perl python3 rsync kmod ccache manpages-dev groff-base \
            gcc-multilib libc6-dev-i386

.PHONY: help deps kernel stock-kernel check-series send-ready rootfs tests run test check test-crash mutants bench bench-quick shell clean

help:
	@echo "mapsync: patched 6.12 kernel + QEMU NVDIMM guest + MAP_SYNC tests"
	@echo
	@echo "  make run           the tests on both kernels, then the short benchmark (BENCH=full: the"
	@echo "                     whole one, as make bench), then the report, in build/results/<time>/"
	@echo "  make test          the test suite on the patched and the stock kernel (two lanes; SERIAL=1: one after the other)"
	@echo "                     (ends with 'N passed, N failed, N skipped')"
	@echo "  make check T='PROG[:PATTERN] ...'  only those programs (or their cases matching a shell"
	@echo "                     pattern of FIXTURE.VARIANT.TEST, e.g. T='sync_fault_alloc:one_fault.*') in one"
	@echo "                     boot of KERNEL (default patched), no self-test, power cuts or benchmark;"
	@echo "                     what failed: T=\"\$$(cat build/results/latest/failed-patched.list)\""
	@echo "  make test-crash    power-failure tests: 20 random power cuts per file system"
	@echo "  make mutants       build kernels with one deliberate bug each; the suite must kill each"
	@echo "                     (kill table; MUTANTS='name ...' for a subset; not part of make test)"
	@echo "  make bench         fault-path benchmark in guest instructions (QEMU icount): stock, the series"
	@echo "                     without its look-ahead, and patched, 3 repetitions each (TWIN=1: and the"
	@echo "                     twin build: what a rebuild alone moves a cell by)"
	@echo "  make bench-quick   the same, 1 repetition, fewer faults (a few minutes)"
	@echo "  make shell         interactive shell in the guest (pmem at build/pmem/pmem0.img)"
	@echo "  make deps          install missing Debian packages (root; apt-get update first)"
	@echo "  make kernel        build the patched kernel  -> build/kernel/patched/bzImage"
	@echo "  make stock-kernel  build the unpatched kernel -> build/kernel/stock/bzImage"
	@echo "  make check-series  checkpatch --strict each patch; build after each one"
	@echo "  make send-ready    the three series as mails in build/send/, checked (BUILD=1: + check-series)"
	@echo "  make rootfs        build the guest initramfs -> $(INITRD)"
	@echo "  make clean         remove build output (keeps build/pmem images and build/results)"
	@echo
	@echo "  variables: KERNEL=patched|stock (the kernel run/shell boot; test: only that one)"
	@echo "             KSRC=<kernel tree>: test, check, shell, test-crash on your own tree (built out of"
	@echo "             tree with mapsync.config into build/kernel/tree-*/); BZIMAGE=<image>: on an image"
	@echo "             built elsewhere; ROLE=plain|patched|stock: what to expect of it (default plain)"
	@echo "             KCONFIG=default|debug|gdb (debug: lockdep, KFENCE, DEBUG_VM; gdb: debug info for --gdb)"
	@echo "             RUNFLAGS='...' (extra qemu/mapsync-run options, e.g. --accel tcg)"
	@echo "             SERIAL=1 (test, run: the suite's boots one after the other, not in two lanes)"
	@echo "             RESULTS=<dir> (test, check, run: the results folder; default build/results/<time>,"
	@echo "             build/results/latest points at the last: run.ktap, junit.xml, failed.list)"

# --- packages: only what is missing, apt-get update once first
deps:
	@missing=$$(for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		[ "$$(id -u)" = 0 ] || { echo "deps: missing packages: $$missing; run 'make deps' as root" >&2; exit 1; }; \
		echo "[$$(date +%T)] deps: installing $$(echo $$missing)"; \
		mkdir -p $(B)/logs; log=$(B)/logs/$$(date +%Y%m%d-%H%M%S)-apt.log; \
		apt-get update -q >$$log 2>&1 && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >>$$log 2>&1 || \
			{ echo "deps: apt-get failed; see $$log" >&2; tail -n 20 $$log >&2; exit 1; }; \
	fi

# --- kernels: the build script itself is incremental; make only decides whether to call it
kernel: deps $(B)/kernel/patched$(DBG)/bzImage
stock-kernel: deps $(B)/kernel/stock$(DBG)/bzImage

# every patch checkpatch-clean, and the tree building after each one
check-series: deps $(B)/kernel/stock/bzImage
	@kernel-patches/check-series.sh

# the three series (kernel-patches/covers/) as ready-to-send mails, checked
send-ready: deps
	@kernel-patches/package-series.sh $(if $(filter 1,$(BUILD)),--build)

$(B)/kernel/patched/bzImage: $(KDEPS) kernel-patches/series $(PATCHES)
	kernel-patches/build-kernel.sh patched default
$(B)/kernel/patched-debug/bzImage: $(KDEPS) kernel-patches/series $(PATCHES)
	kernel-patches/build-kernel.sh patched debug
$(B)/kernel/patched-gdb/bzImage: $(KDEPS) kernel-patches/series $(PATCHES)
	kernel-patches/build-kernel.sh patched gdb
$(B)/kernel/stock-gdb/bzImage: $(KDEPS)
	kernel-patches/build-kernel.sh stock gdb
$(B)/kernel/stock/bzImage: $(KDEPS)
	kernel-patches/build-kernel.sh stock default
$(B)/kernel/no-lookahead/bzImage: $(KDEPS) kernel-patches/series $(PATCHES)
	kernel-patches/build-kernel.sh no-lookahead default
$(B)/kernel/twin/bzImage: $(KDEPS) kernel-patches/series $(PATCHES) kernel-patches/twin.patch
	kernel-patches/build-kernel.sh twin default
# a tree of your own (KSRC=): always asks Kbuild, which knows what changed
.PHONY: $(TREEOBJ)/bzImage
$(TREEOBJ)/bzImage: kernel-patches/build-kernel.sh kernel-patches/mapsync.config
	MAPSYNC_KSRC=$(abspath $(KSRC)) kernel-patches/build-kernel.sh tree $(KCONFIG)
$(B)/kernel/stock-debug/bzImage: $(KDEPS)
	kernel-patches/build-kernel.sh stock debug

# the kselftest harness comes from the unpacked tree of the kernel under test
$(HTREE)/tools/testing/selftests/kselftest_harness.h: | $(HIMAGE)

NPROC := $(shell nproc)

# --- guest programs (run from the 9p share) and the initramfs
# The kselftest of our series is built from the patched tree with the tree's
# own selftest Makefile, and runs on both kernels (stock shows the bugs).
PSRC     := $(B)/kernel/src-patched/linux-source-6.12
POBJ     := $(B)/kernel/obj-patched
SELFTESTS := $(B)/selftests/map_shared_validate

tests: deps $(HTREE)/tools/testing/selftests/kselftest_harness.h $(SELFTESTS) $(B)/tools/faultbench $(B)/tools/agefs
	@$(MAKE) -s -j$(NPROC) -C pmem-tests KSRC=$(abspath $(HTREE)) OUT=$(abspath $(B))/pmem-tests

$(B)/tools/faultbench: bench/faultbench.c pmem-tests/common/mapsync.c pmem-tests/common/mapsync.h
	@echo "  CC      $<"; mkdir -p $(@D)
	@$(CC) -O2 -g -Wall -Wextra -Werror -Ipmem-tests/common -o $@ $< pmem-tests/common/mapsync.c

$(B)/tools/agefs: bench/agefs.c
	@echo "  CC      $<"; mkdir -p $(@D)
	@$(CC) -O2 -g -Wall -Wextra -Werror -o $@ $<

$(POBJ)/usr/include/linux/mman.h: $(B)/kernel/patched/bzImage
	@$(MAKE) -s -C $(PSRC) O=$(abspath $(POBJ)) headers
	@touch $@

$(B)/selftests/%: $(B)/kernel/patched/bzImage $(POBJ)/usr/include/linux/mman.h
	@echo "  CC      selftests/mm/$* (patched tree)"; mkdir -p $(@D)
	@$(MAKE) -s -C $(PSRC)/tools/testing/selftests/mm OUTPUT=$(abspath $(B))/selftests \
		KHDR_INCLUDES="-isystem $(abspath $(POBJ))/usr/include" $(abspath $@)
	@touch $@

# the test programs run from the share, but the libraries they link go in
rootfs: deps tests $(INITRD)
$(INITRD): guest-rootfs/build.sh guest-rootfs/manifest guest-rootfs/init guest-rootfs/powercut \
           $(wildcard pmem-tests/*.c pmem-tests/tools/*.c bench/*.c) pmem-tests/Makefile | tests
	@guest-rootfs/build.sh $(abspath $(INITRD)) $(wildcard $(B)/pmem-tests/* $(B)/tools/*) $(SELFTESTS)

# --- booting
# `make test` runs the suite on the patched and the stock kernel (two lanes, qemu/suite)
# (where each bug our patches fix must reproduce); KERNEL=... runs just one.
ifneq ($(KSRC)$(BZIMAGE),)
TEST_IMAGES  := $(KIMAGE)
else ifeq ($(origin KERNEL),command line)
TEST_IMAGES  := $(B)/kernel/$(KERNEL)$(DBG)/bzImage
else
TEST_IMAGES  := $(foreach k,patched stock,$(B)/kernel/$(k)$(DBG)/bzImage)
endif
# stock, the series without its look-ahead (0011, 0012), the series; TWIN=1:
# and the twin (kernel-patches/twin.patch), what a rebuild alone moves a cell by (report.py's "rebuild")
BENCH_KERNELS := $(B)/kernel/stock/bzImage $(B)/kernel/no-lookahead/bzImage $(B)/kernel/patched/bzImage \
		 $(if $(filter 1,$(TWIN)),$(B)/kernel/twin/bzImage)

test: deps $(TEST_IMAGES) rootfs
	@qemu/suite $(if $(RESULTS),--results $(RESULTS)) $(foreach i,$(TEST_IMAGES),--kernel $(i)) $(KROLE) $(if $(filter 1,$(SERIAL)),--serial) $(RUNFLAGS)

# check: the named programs or cases alone, on one kernel (the edit-and-test loop)
ifneq ($(filter check,$(MAKECMDGOALS)),)
ifeq ($(strip $(T)),)
$(error check: name what to run: make check T='sync_faults' or T='sync_fault_alloc:one_fault.*' (the programs: pmem-tests/*.c))
endif
endif
check: deps $(KIMAGE) rootfs
	@qemu/suite $(if $(RESULTS),--results $(RESULTS)) --kernel $(KIMAGE) $(KROLE) --crash-cycles 0 $(RUNFLAGS) -- $(strip $(T))

# run: the suite on both kernels, then the short benchmark (BENCH=full for
# the whole one, an hour more), with everything in build/results/<time>/
BENCH ?= quick
run: deps $(TEST_IMAGES) $(BENCH_KERNELS) rootfs
	@d=$(or $(RESULTS),$(B)/results/$$(date +%Y%m%d-%H%M%S)); \
	qemu/suite --results $$d $(foreach i,$(TEST_IMAGES),--kernel $(i)) $(if $(filter 1,$(SERIAL)),--serial) $(RUNFLAGS); rc=$$?; \
	bench/bench $(if $(filter quick,$(BENCH)),--quick) --out $$d/bench \
		$(foreach k,$(BENCH_KERNELS),--kernel $(k)) $(RUNFLAGS) > $$d/bench.log 2>&1 || rc=1; \
	echo; cat $$d/report.md; echo; \
	if [ -f $$d/bench/report.md ]; then sed -n '1,/^## Every cell/p' $$d/bench/report.md | head -n -1; \
		echo "plots: $$(ls $$d/bench/*.png | head -3 | tr '\n' ' ')... ($$(ls $$d/bench/*.png | wc -l) in $$d/bench/)"; \
	else echo "bench failed: see $$d/bench.log"; tail -n 20 $$d/bench.log; fi; \
	echo "results: $$d"; exit $$rc

# bench: stock, the series without its look-ahead, and patched, booted in
# turn, 3 repetitions each, timed in guest instructions (bench/bench);
# bench-quick: 1 repetition with fewer faults (a smoke check, a few minutes)
bench: deps $(BENCH_KERNELS) rootfs
	@bench/bench $(foreach k,$(BENCH_KERNELS),--kernel $(k)) $(RUNFLAGS)
bench-quick: deps $(BENCH_KERNELS) rootfs
	@bench/bench --quick $(foreach k,$(BENCH_KERNELS),--kernel $(k)) $(RUNFLAGS)

# test-crash: the power-failure tests alone, 20 random cycles per fs
CRASH_CYCLES ?= 20
test-crash: deps $(KIMAGE) rootfs
	@qemu/crash --cycles $(CRASH_CYCLES) --kernel $(KIMAGE) $(RUNFLAGS)

# mutants: each kernel-patches/mutants/NAME.patch on top of the series, built
# incrementally; the parts of the suite its Kills: header names must fail
# (kill table in build/results/mutants-<time>/).  MUTANTS='name ...': a subset.
mutants: deps $(B)/kernel/patched/bzImage rootfs
	@MUTANTS="$(MUTANTS)" kernel-patches/mutants/run-on-host $(RUNFLAGS)

shell: deps $(KIMAGE) rootfs
	@qemu/mapsync-run --shell -k $(KIMAGE) $(RUNFLAGS)

clean:
	@echo "clean: removing build output; keeping build/pmem (pmem images) and build/results"
	rm -rf $(B)/kernel $(B)/rootfs $(B)/pmem-tests $(B)/selftests $(B)/tools $(B)/test-images \
		$(B)/crash $(B)/accel $(B)/logs
