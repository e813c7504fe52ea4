/*
 * elf_check.h - what libelf does not check: that an ELF's header tables and
 * sections lie inside the bytes it was opened on.
 *
 * libelf (elfutils) opens a file whose section header table runs past its
 * end as a file without sections, and says nothing: a truncated library
 * then looks like one that holds no kernels.  Every reader here (cubins,
 * host ELF files, archive members) calls img_elf_check before it trusts a
 * handle, so a cut file is reported as cut.
 */
#ifndef SM120_CORE_IMAGE_ELF_CHECK_H
#define SM120_CORE_IMAGE_ELF_CHECK_H

#include <libelf.h>
#include <stddef.h>

#include "../common/err.h"

/*
 * img_elf_check - 0 when @elf (an ELF_K_ELF handle over @len bytes) has a
 * readable ELF header, program and section header tables inside @len, and
 * every section with file contents inside @len.  Otherwise -EINVAL with @err
 * naming @origin and the defect ("truncated ELF: the section header table
 * (34 x 64 bytes at byte 1033616) runs past the end of its 1035791 bytes").
 */
int img_elf_check(Elf *elf, size_t len, const char *origin, struct sm_err *err);

/*
 * img_elf_open_error - the message for ELF bytes @buf[0..len) that libelf
 * would not open (elf_begin or elf_memory returned NULL, or the handle is no
 * ELF_K_ELF): "truncated" when they stop inside the ELF header, else
 * libelf's reason.  Returns -EINVAL.
 */
int img_elf_open_error(const void *buf, size_t len, const char *origin, struct sm_err *err);

/*
 * img_elf_why - libelf's message for its last error (which is then cleared),
 * or @fallback when libelf recorded none: never "no error".
 */
const char *img_elf_why(const char *fallback);

#endif
