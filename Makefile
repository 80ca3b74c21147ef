# make            -> build/lib/libusmc.so, build/bin/usmc
# make SAN=asan   -> the same under build-asan/, with AddressSanitizer and UBSan
# make SAN=tsan   -> the same under build-tsan/, with ThreadSanitizer
# make test       -> every test suite (see tests/run-all.sh)
# make install    -> PREFIX (/usr/local) under DESTDIR: bin/usmc, bin/usmc-nvme, lib/libusmc.so,
#                    include/usmc/{usmc,ddp,erm}.h, lib/pkgconfig/usmc.pc, share/man/man{1,3,7}
# usmc-nvme (usmc nvme) links with the library, and with ISA-L (libisal-dev) for CRC32C when
# its header is there; without it, the library's own CRC32C serves.
# Path lengths are checked where they matter, so -Wformat-truncation is noise here.

CC ?= cc
SAN ?=
PREFIX ?= /usr/local
DESTDIR ?=
BUILD := build$(if $(SAN),-$(SAN))

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Werror -Wshadow -fPIC -pthread -Wno-format-truncation
ifeq ($(SAN),asan)
  SANFLAGS := -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  SANRT := $(shell $(CC) -print-file-name=libasan.so)
else ifeq ($(SAN),tsan)
  SANFLAGS := -O1 -fsanitize=thread
  SANRT := $(shell $(CC) -print-file-name=libtsan.so)
else ifeq ($(SAN),)
  SANFLAGS := -O2
else
  $(error SAN must be asan or tsan)
endif
CFLAGS += $(CFLAGS_BASE) $(SANFLAGS)

CORE := $(wildcard src/core/*.c) $(wildcard src/dev/*.c) $(wildcard src/util/*.c)
LIBSRC := $(CORE) $(wildcard src/erm/*.c) $(wildcard src/interpose/*.c)
TOOLSRC := $(filter-out src/tools/nvme%,$(wildcard src/tools/*.c)) \
	$(addprefix src/core/,addr.c config.c decline.c policy.c procfile.c regentry.c stats.c sys.c) \
	$(addprefix src/dev/,chan.c heap.c ivs_proto.c listeners.c region.c regionfile.c slots.c)
NVMESRC := $(wildcard src/tools/nvme*.c) $(wildcard src/nvme/*.c) src/util/crc32c.c
ISAL := $(shell printf '\043include <isa-l/crc.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo yes)
NVME_CFLAGS := $(if $(ISAL),-DUSMC_ISAL)
NVME_LIBS := $(if $(ISAL),-lisal)

LIBOBJ := $(LIBSRC:%.c=$(BUILD)/obj/%.o)
TOOLOBJ := $(TOOLSRC:%.c=$(BUILD)/obj/tool/%.o)
NVMEOBJ := $(NVMESRC:%.c=$(BUILD)/obj/nvme/%.o)
HEADERS := $(wildcard src/*/*.h) $(wildcard include/usmc/*.h)

all: $(BUILD)/lib/libusmc.so $(BUILD)/bin/usmc $(BUILD)/bin/usmc-nvme

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -c $< -o $@

$(BUILD)/obj/tool/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude $(if $(SANRT),-DUSMC_SANITIZER_RUNTIME='"$(SANRT)"') -c $< -o $@

$(BUILD)/obj/nvme/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NVME_CFLAGS) -Iinclude -c $< -o $@

$(BUILD)/lib/libusmc.so: $(LIBOBJ) src/interpose/exports.map
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -Wl,--version-script=src/interpose/exports.map -Wl,-z,defs \
		-o $@ $(LIBOBJ) -ldl

$(BUILD)/bin/usmc: $(TOOLOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(TOOLOBJ) -ldl

# -lusmc ahead of the C library, whose calls it wraps.
$(BUILD)/bin/usmc-nvme: $(NVMEOBJ) $(BUILD)/lib/libusmc.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(NVMEOBJ) -L$(BUILD)/lib -lusmc -Wl,-rpath,'$$ORIGIN/../lib' $(NVME_LIBS)

test: all
	tests/run-all.sh

# The tool finds the library as ../lib/libusmc.so from its own directory.
MANDIR := $(DESTDIR)$(PREFIX)/share/man

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/usmc \
		$(MANDIR)/man1 $(MANDIR)/man3 $(MANDIR)/man7
	install -m 755 $(BUILD)/bin/usmc $(DESTDIR)$(PREFIX)/bin/usmc
	install -m 755 $(BUILD)/bin/usmc-nvme $(DESTDIR)$(PREFIX)/bin/usmc-nvme
	install -m 755 $(BUILD)/lib/libusmc.so $(DESTDIR)$(PREFIX)/lib/libusmc.so
	install -m 644 include/usmc/usmc.h include/usmc/ddp.h include/usmc/erm.h $(DESTDIR)$(PREFIX)/include/usmc/
	sed 's|@PREFIX@|$(PREFIX)|' usmc.pc.in >$(DESTDIR)$(PREFIX)/lib/pkgconfig/usmc.pc
	install -m 644 $(wildcard man/*.1) $(MANDIR)/man1
	install -m 644 $(wildcard man/*.3) $(MANDIR)/man3
	install -m 644 $(wildcard man/*.7) $(MANDIR)/man7

clean:
	rm -rf build build-asan build-tsan

.PHONY: all test install clean
