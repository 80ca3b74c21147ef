# make            -> build/lib/libusmc.so, build/bin/usmc
# make SAN=asan   -> the same under build-asan/, with AddressSanitizer and UBSan
# make SAN=tsan   -> the same under build-tsan/, with ThreadSanitizer
# make test       -> every test suite (see tests/run-all.sh)
# make install    -> PREFIX (/usr/local) under DESTDIR: bin/usmc, lib/libusmc.so,
#                    include/usmc/usmc.h, lib/pkgconfig/usmc.pc, share/man/man{1,7}
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

CORE := $(wildcard src/core/*.c) $(wildcard src/dev/*.c)
LIBSRC := $(CORE) $(wildcard src/interpose/*.c)
TOOLSRC := $(wildcard src/tools/*.c) $(addprefix src/core/,addr.c config.c decline.c policy.c \
	procfile.c regentry.c stats.c sys.c) $(addprefix src/dev/,chan.c heap.c listeners.c region.c \
	regionfile.c slots.c)

LIBOBJ := $(LIBSRC:%.c=$(BUILD)/obj/%.o)
TOOLOBJ := $(TOOLSRC:%.c=$(BUILD)/obj/tool/%.o)
HEADERS := $(wildcard src/*/*.h) $(wildcard include/usmc/*.h)

all: $(BUILD)/lib/libusmc.so $(BUILD)/bin/usmc

$(BUILD)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -c $< -o $@

$(BUILD)/obj/tool/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude $(if $(SANRT),-DUSMC_SANITIZER_RUNTIME='"$(SANRT)"') -c $< -o $@

$(BUILD)/lib/libusmc.so: $(LIBOBJ) src/interpose/exports.map
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -Wl,--version-script=src/interpose/exports.map -Wl,-z,defs \
		-o $@ $(LIBOBJ) -ldl

$(BUILD)/bin/usmc: $(TOOLOBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(TOOLOBJ) -ldl

test: all
	tests/run-all.sh

# The tool finds the library as ../lib/libusmc.so from its own directory.
MANDIR := $(DESTDIR)$(PREFIX)/share/man

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/usmc \
		$(MANDIR)/man1 $(MANDIR)/man7
	install -m 755 $(BUILD)/bin/usmc $(DESTDIR)$(PREFIX)/bin/usmc
	install -m 755 $(BUILD)/lib/libusmc.so $(DESTDIR)$(PREFIX)/lib/libusmc.so
	install -m 644 include/usmc/usmc.h $(DESTDIR)$(PREFIX)/include/usmc/usmc.h
	sed 's|@PREFIX@|$(PREFIX)|' usmc.pc.in >$(DESTDIR)$(PREFIX)/lib/pkgconfig/usmc.pc
	install -m 644 $(wildcard man/*.1) $(MANDIR)/man1
	install -m 644 $(wildcard man/*.7) $(MANDIR)/man7

clean:
	rm -rf build build-asan build-tsan

.PHONY: all test install clean
