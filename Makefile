# kwb: build, test and run. `make` prints one short line per step (V=1 shows commands).

CC      ?= cc
PKGS    := libzstd libcurl sqlite3 libedit libffi libssl libcrypto
LUADIR  := $(shell pkg-config --variable=libdir lua5.4 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
# Lua, LPeg and lua-cjson are linked statically: the GPU machine has no Lua.
LUA_A   := $(LUADIR)/liblua5.4-lpeg.a $(LUADIR)/liblua5.4-cjson.a $(LUADIR)/liblua5.4.a
# libseccomp too: the sandbox's system call filter (core/sandbox.c).
SECCOMP_A := $(shell pkg-config --variable=libdir libseccomp 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)/libseccomp.a
# hiredis too (kwb.runners.queue's Redis Streams): the GPU machine has no libhiredis
# (and Debian's hiredis.pc names the wrong libdir: the compiler finds it).
HIREDIS_A := $(shell $(CC) -print-file-name=libhiredis.a)
WARN    := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN) -Icore -Ibuild \
           $(shell pkg-config --cflags lua5.4 $(PKGS) 2>/dev/null)
LDLIBS  := $(LUA_A) $(SECCOMP_A) $(HIREDIS_A) $(shell pkg-config --libs $(PKGS) 2>/dev/null) -ldl -lm -lpthread
# -E: symbols for the FFI; full RELRO (-z now): kwb's GOT read-only from the start, so
# no code a sandbox runs can redirect kwb's own calls through it
LDFLAGS += -Wl,-E -Wl,-z,relro,-z,now

ifeq ($(V),1)
Q :=
else
Q := @
endif

CORE_SRC := $(filter-out core/main.c,$(wildcard core/*.c))
# libkwb.so: the core without the CLI (no Lua, no REPL), for C programs and
# LuaJIT's FFI; its objects built position-independent apart.
LIB_SRC  := $(filter-out core/main.c core/lua_%.c core/luastate.c core/repl.c,$(wildcard core/*.c))
LIB_OBJ  := $(LIB_SRC:core/%.c=build/pic/%.o) build/pic/cuda_sources.o
LIB_LIBS := $(shell pkg-config --libs libzstd sqlite3 libffi libcrypto libseccomp 2>/dev/null) -ldl -lm -lpthread
PREFIX   ?= /usr/local
VERSION  := $(shell sed -n 's/.*kwb_version(void) { return "\(.*\)"; }/\1/p' core/error.c)
CORE_OBJ := $(CORE_SRC:core/%.c=build/obj/%.o) build/obj/bundle.o build/obj/cuda_sources.o
# (LuaJIT's module for libkwb.so, luajit/kwb/ffi.lua, is installed, never bundled)
LUA_SRC  := $(shell find lua -name '*.lua' | LC_ALL=C sort)
UNIT_SRC := $(wildcard tests/unit/test_*.c)

.PHONY: all run test unit deps clean bench-cache bench-workers gpu-test gpu-multi install uninstall man
all: kwb libkwb.so build/kwb_cdef.h

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

# kwb.h's declarations as LuaJIT's ffi.cdef reads them (luajit/kwb/ffi.lua)
build/kwb_cdef.h: core/kwb.h tools/cdef.sh | build/obj
	@printf '  CDEF  %s\n' $@
	$(Q)tools/cdef.sh core/kwb.h $@

libkwb.so: $(LIB_OBJ)
	@printf '  LINK  %s\n' $@
	$(Q)$(CC) -shared -Wl,--no-undefined -o $@ $^ $(LIB_LIBS)

build/pic/%.o: core/%.c $(wildcard core/*.h) | build/pic
	@printf '  CC    %s (pic)\n' $<
	$(Q)$(CC) $(CFLAGS) -fPIC -c -o $@ $<

# make install [PREFIX=/usr/local] [DESTDIR=]: the program, the library, its
# header and pkg-config file, the man page and the shell completions.
INSTALLED := bin/kwb lib/libkwb.so include/kwb.h lib/pkgconfig/kwb.pc share/man/man1/kwb.1 \
             share/bash-completion/completions/kwb share/zsh/site-functions/_kwb \
             share/lua/5.1/kwb/ffi.lua share/lua/5.1/kwb/kwb_cdef.h
install: kwb libkwb.so build/kwb_cdef.h build/kwb_cdef.h
	@printf '  INSTALL %s\n' $(DESTDIR)$(PREFIX)
	$(Q)install -d $(addprefix $(DESTDIR)$(PREFIX)/,bin lib/pkgconfig include share/man/man1 \
	    share/bash-completion/completions share/zsh/site-functions share/lua/5.1/kwb)
	$(Q)install -m 755 kwb $(DESTDIR)$(PREFIX)/bin/kwb
	$(Q)install -m 644 libkwb.so $(DESTDIR)$(PREFIX)/lib/libkwb.so
	$(Q)install -m 644 core/kwb.h $(DESTDIR)$(PREFIX)/include/kwb.h
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' tools/kwb.pc.in >$(DESTDIR)$(PREFIX)/lib/pkgconfig/kwb.pc
	$(Q)install -m 644 docs/kwb.1 $(DESTDIR)$(PREFIX)/share/man/man1/kwb.1
	$(Q)install -m 644 tools/completion/kwb.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/kwb
	$(Q)install -m 644 tools/completion/_kwb $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_kwb
	$(Q)install -m 644 luajit/kwb/ffi.lua build/kwb_cdef.h $(DESTDIR)$(PREFIX)/share/lua/5.1/kwb/

# make man: docs/kwb.1's sections that lua/kwb/help/init.lua describes, written again
# (the tests fail while the page and help.lua differ)
man: kwb
	$(Q)./kwb tools/man.lua docs/kwb.1

uninstall:
	@printf '  UNINSTALL %s\n' $(DESTDIR)$(PREFIX)
	$(Q)rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))

# The commit kwb is built from (git's short hash, "-dirty" with uncommitted
# changes, "unknown" outside a git tree): kwb.core.commit, which a run's
# certificate records (kwb.loop.certify). Rewritten only when it changes.
KWB_COMMIT := $(shell h=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null && echo $$h || echo $$h-dirty; } || echo unknown)
build/commit.h: FORCE | build/obj
	$(Q)printf '#define KWB_COMMIT "%s"\n' '$(KWB_COMMIT)' >$@.new; cmp -s $@.new $@ && rm -f $@.new || mv $@.new $@
build/obj/lua_core.o: build/commit.h
.PHONY: FORCE
FORCE:

build/obj/bundle.o: build/bundle.c core/bundle.h | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

build/bundle.c: build/embed $(LUA_SRC)
	@printf '  EMBED %d Lua modules\n' $(words $(LUA_SRC))
	$(Q)build/embed $@ lua $(LUA_SRC)

# kwb's own CUDA sources (cuda_builtin.c compiles them with NVRTC) and its
# Python programs (core.python_source: the reference process of a PyTorch
# problem), each file's exact bytes as a C string: SYMBOL=FILE
CUDA_EMBED := kwb_cuda_builtin_source=core/cuda/kwb_builtin.cu kwb_cuda_wmma_source=core/cuda/kwb_wmma.cu \
              kwb_torch_ref_source=python/kwb_torch_ref.py kwb_start_source=python/kwb_start.py

build/cuda_sources.c: build/embed $(foreach e,$(CUDA_EMBED),$(lastword $(subst =, ,$(e))))
	@printf '  EMBED %d CUDA and Python sources\n' $(words $(CUDA_EMBED))
	$(Q)build/embed -s $@ $(CUDA_EMBED)

build/obj/cuda_sources.o: build/cuda_sources.c | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

build/pic/cuda_sources.o: build/cuda_sources.c | build/pic
	@printf '  CC    %s (pic)\n' $<
	$(Q)$(CC) $(CFLAGS) -fPIC -c -o $@ $<

build/embed: tools/embed.c | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) -O2 -Wall -Wextra -o $@ $<

build/obj:
	$(Q)mkdir -p $@ build/unit build/asan

build/pic:
	$(Q)mkdir -p $@

# C unit tests, built twice: plain, and under AddressSanitizer + UBSan.
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
build/unit/%: tests/unit/%.c tests/unit/unit.h $(CORE_OBJ) | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(CORE_OBJ) $(LDLIBS)

build/asan/%: tests/unit/%.c tests/unit/unit.h $(CORE_SRC) build/bundle.c build/cuda_sources.c build/commit.h | build/obj
	@printf '  CC    %s (asan+ubsan)\n' $<
	$(Q)$(CC) $(CFLAGS) -O1 $(SAN) -Itests/unit -o $@ $< $(CORE_SRC) build/bundle.c build/cuda_sources.c $(LDLIBS)

UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=build/unit/%) $(UNIT_SRC:tests/unit/%.c=build/asan/%)
unit: $(UNIT_BIN) build/ttydrive build/httpd

build/ttydrive: tests/ttydrive.c | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -o $@ $< -lutil

# The scripted HTTP server the agent tests stand in for model APIs with.
build/httpd: tests/httpd.c | build/obj
	@printf '  CC    %s\n' $<
	$(Q)$(CC) $(CFLAGS) -o $@ $<

test: kwb libkwb.so build/kwb_cdef.h unit
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
	rm -rf build kwb libkwb.so
