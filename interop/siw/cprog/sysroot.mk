# Compiler and linker settings shared by the suite's C programs (cprog/,
# rpmaclient/). SYSROOT points at a tree holding the -dev packages
# (interop/siw/build.sh unpacks Debian's there); empty means the system's.
CC ?= gcc
SYSROOT ?=
CFLAGS ?= -O2
CFLAGS += -Wall -Wextra -std=gnu11
MULTIARCH ?= x86_64-linux-gnu
ifneq ($(SYSROOT),)
CPPFLAGS += -I$(SYSROOT)/usr/include
LDFLAGS += -L$(SYSROOT)/usr/lib/$(MULTIARCH) -Wl,-rpath-link,$(SYSROOT)/usr/lib/$(MULTIARCH) \
	-Wl,-rpath-link,$(SYSROOT)/lib/$(MULTIARCH)
endif
