# kwb: build, test and run. `make` prints one short line per step (V=1 shows commands).

CC      ?= cc
PKGS    := libzstd libcurl sqlite3 libedit libffi libcrypto
LUADIR  := $(shell pkg-config --variable=libdir lua5.4 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
# Lua, LPeg and lua-cjson are linked statically: the GPU machine has no Lua.
LUA_A   := $(LUADIR)/liblua5.4-lpeg.a $(LUADIR)/liblua5.4-cjson.a $(LUADIR)/liblua5.4.a
# libseccomp too: the sandbox's system call filter (core/sandbox.c).
SECCOMP_A := $(shell pkg-config --variable=libdir libseccomp 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)/libseccomp.a
WARN    := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN) -Icore -Ibuild \
           $(shell pkg-config --cflags lua5.4 $(PKGS) 2>/dev/null)
LDLIBS  := $(LUA_A) $(SECCOMP_A) $(shell pkg-config --libs $(PKGS) 2>/dev/null) -ldl -lm -lpthread -lutil
LDFLAGS += -Wl,-E

ifeq ($(V),1)
Q :=
else
Q := @
endif

CORE_SRC := $(filter-out core/main.c,$(wildcard core/*.c))
CORE_OBJ := $(CORE_SRC:core/%.c=build/obj/%.o) build/obj/bundle.o
LUA_SRC  := $(shell find lua -name '*.lua' | LC_ALL=C sort)
UNIT_SRC := $(wildcard tests/unit/test_*.c)

.PHONY: all run test unit deps clean bench-cache bench-workers gpu-test gpu-multi
all: kwb

deps:
	$(Q)tools/deps.sh

# The main demo: the flagship GPU recipe where a CUDA device is present, the
# research loop on a host recipe otherwise, its model's replies replayed from
# a hand-written transcript when no model is configured (kwb demo says which
# and why).
run: deps
	$(Q)$(MAKE) --no-print-directory kwb
	$(Q)./kwb demo

kwb: build/obj/main.o $(CORE_OBJ)
	@printf '  LINK  %s\n' $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

build/obj/%.o: core/%.c $(wildcard core/*.h) | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

build/obj/bundle.o: build/bundle.c core/bundle.h | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

build/bundle.c: build/embed $(LUA_SRC)
	@printf '  EMBED %d Lua modules\n' $(words $(LUA_SRC))
	$(Q)build/embed $@ lua $(LUA_SRC)

build/embed: tools/embed.c | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) -O2 -Wall -Wextra -o $@ $<

build/obj:
	$(Q)mkdir -p $@ build/unit build/asan

# C unit tests, built twice: plain, and under AddressSanitizer + UBSan.
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
build/unit/%: tests/unit/%.c tests/unit/unit.h $(CORE_OBJ) | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(CORE_OBJ) $(LDLIBS)

build/asan/%: tests/unit/%.c tests/unit/unit.h $(CORE_SRC) build/bundle.c | build/obj
	@printf '  CC    %s (asan+ubsan)\n' $<
	$(Q)$(CC) $(CFLAGS) -O1 $(SAN) -Itests/unit -o $@ $< $(CORE_SRC) build/bundle.c $(LDLIBS)

UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=build/unit/%) $(UNIT_SRC:tests/unit/%.c=build/asan/%)
unit: $(UNIT_BIN) build/ttydrive build/httpd

build/ttydrive: tests/ttydrive.c | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -o $@ $< -lutil

# The scripted HTTP server the agent tests stand in for model APIs with.
build/httpd: tests/httpd.c | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -o $@ $<

test: kwb unit
	$(Q)tests/run

# The candidate cache's compression ratio, insert and lookup rates (docs/perf.md).
# Throughput with 1 and 2 GPUs (needs a machine with two); runs the built ./kwb.
gpu-multi:
	$(Q)LUA_PATH="tests/lua/?.lua;;" ./kwb tests/gpu/multi_gpu.lua

bench-workers: kwb
	$(Q)./kwb tests/bench/workers_bench.lua 3

bench-cache: kwb
	$(Q)./kwb tests/bench/cache_bench.lua 1000

# The GPU tests: run on the GPU machine with the ./kwb built here (never rebuilds).
gpu-test:
	$(Q)tests/gpu/run

clean:
	rm -rf build kwb
