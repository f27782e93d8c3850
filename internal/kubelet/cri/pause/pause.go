package pause

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Linux syscall numbers and constants the program uses.
const (
	sigBlock = 0 // SIG_BLOCK for rt_sigprocmask
	// sigset is the mask {SIGINT (2), SIGTERM (15)}: bit n-1 for signal n.
	sigset = 1<<(2-1) | 1<<(15-1)
	// sigsetSize is the kernel's sigset_t size in bytes.
	sigsetSize = 8
)

// loadAddress is the virtual address the single segment is mapped at.
const loadAddress = 0x400000

// Sizes of the ELF64 header and program header.
const (
	ehdrSize = 64
	phdrSize = 56
	numPhdrs = 2 // PT_LOAD and PT_GNU_STACK
	codeOff  = ehdrSize + numPhdrs*phdrSize
)

// arch describes how to assemble the program for one architecture.
type arch struct {
	machine uint16 // ELF e_machine
	align   uint64 // PT_LOAD alignment (largest page size of the architecture)
	// code returns the machine code, data included, to be placed right
	// after the program headers.
	code func() []byte
}

var arches = map[string]arch{
	"amd64": {machine: 62, align: 0x1000, code: amd64Code},
	"arm64": {machine: 183, align: 0x10000, code: arm64Code},
}

// ELF returns the pause executable for goarch ("amd64" or "arm64"). The
// result is a fresh slice the caller owns. It fails only for other
// architectures.
func ELF(goarch string) ([]byte, error) {
	a, ok := arches[goarch]
	if !ok {
		return nil, fmt.Errorf("pause: no program for architecture %q (have amd64, arm64)", goarch)
	}
	code := a.code()
	size := uint64(codeOff + len(code))

	var b bytes.Buffer
	le := binary.LittleEndian
	w := func(v any) { _ = binary.Write(&b, le, v) }
	// ELF header.
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little endian */, 1 /* version */, 0 /* SysV ABI */})
	b.Write(make([]byte, 8))         // padding of e_ident
	w(uint16(2))                     // e_type: ET_EXEC
	w(a.machine)                     // e_machine
	w(uint32(1))                     // e_version
	w(uint64(loadAddress + codeOff)) // e_entry
	w(uint64(ehdrSize))              // e_phoff
	w(uint64(0))                     // e_shoff: no sections
	w(uint32(0))                     // e_flags
	w(uint16(ehdrSize))              // e_ehsize
	w(uint16(phdrSize))              // e_phentsize
	w(uint16(numPhdrs))              // e_phnum
	w(uint16(0))                     // e_shentsize
	w(uint16(0))                     // e_shnum
	w(uint16(0))                     // e_shstrndx
	// PT_LOAD: the whole file, readable and executable.
	w(uint32(1))           // p_type
	w(uint32(4 | 1))       // p_flags: R, X
	w(uint64(0))           // p_offset
	w(uint64(loadAddress)) // p_vaddr
	w(uint64(loadAddress)) // p_paddr
	w(size)                // p_filesz
	w(size)                // p_memsz
	w(a.align)             // p_align
	// PT_GNU_STACK: a non-executable stack.
	w(uint32(0x6474e551)) // p_type
	w(uint32(4 | 2))      // p_flags: R, W
	for range 5 {
		w(uint64(0)) // p_offset, p_vaddr, p_paddr, p_filesz, p_memsz
	}
	w(uint64(16)) // p_align
	b.Write(code)
	return b.Bytes(), nil
}

// amd64Code returns the x86-64 machine code:
//
//	   xor  edi, edi              ; how = SIG_BLOCK
//	   lea  rsi, [rip+set]        ; set
//	   xor  edx, edx              ; oldset = NULL
//	   mov  r10d, 8               ; sigsetsize
//	   mov  eax, 14               ; rt_sigprocmask
//	   syscall
//	wait:
//	   lea  rdi, [rip+set]        ; set
//	   xor  esi, esi              ; info = NULL
//	   xor  edx, edx              ; timeout = NULL (forever)
//	   mov  r10d, 8               ; sigsetsize
//	   mov  eax, 128              ; rt_sigtimedwait
//	   syscall
//	   test rax, rax
//	   js   wait                  ; -EINTR and friends: wait again
//	   xor  edi, edi              ; status 0
//	   mov  eax, 231              ; exit_group
//	   syscall
//	set: .quad sigset
func amd64Code() []byte {
	var c []byte
	emit := func(b ...byte) { c = append(c, b...) }
	// ripRel emits a 4-byte displacement to the set, patched below.
	var patches []int
	ripRel := func() { patches = append(patches, len(c)); emit(0, 0, 0, 0) }
	imm32 := func(v uint32) { c = binary.LittleEndian.AppendUint32(c, v) }

	emit(0x31, 0xff)                // xor edi, edi
	emit(0x48, 0x8d, 0x35)          // lea rsi, [rip+disp32]
	ripRel()                        //
	emit(0x31, 0xd2)                // xor edx, edx
	emit(0x41, 0xba)                // mov r10d, imm32
	imm32(sigsetSize)               //
	emit(0xb8)                      // mov eax, imm32
	imm32(14)                       // rt_sigprocmask
	emit(0x0f, 0x05)                // syscall
	wait := len(c)                  //
	emit(0x48, 0x8d, 0x3d)          // lea rdi, [rip+disp32]
	ripRel()                        //
	emit(0x31, 0xf6)                // xor esi, esi
	emit(0x31, 0xd2)                // xor edx, edx
	emit(0x41, 0xba)                // mov r10d, imm32
	imm32(sigsetSize)               //
	emit(0xb8)                      // mov eax, imm32
	imm32(128)                      // rt_sigtimedwait
	emit(0x0f, 0x05)                // syscall
	emit(0x48, 0x85, 0xc0)          // test rax, rax
	emit(0x78, byte(wait-len(c)-2)) // js rel8 back to wait
	emit(0x31, 0xff)                // xor edi, edi
	emit(0xb8)                      // mov eax, imm32
	imm32(231)                      // exit_group
	emit(0x0f, 0x05)                // syscall
	for len(c)%8 != 0 {
		emit(0xcc) // int3 padding so the set is 8-byte aligned
	}
	set := len(c)
	c = binary.LittleEndian.AppendUint64(c, sigset)
	for _, p := range patches {
		// A RIP-relative displacement counts from the end of the
		// instruction, which is where the 4 displacement bytes end.
		binary.LittleEndian.PutUint32(c[p:], uint32(int32(set-(p+4))))
	}
	return c
}

// arm64Code returns the AArch64 machine code:
//
//	   movz x0, #0                ; how = SIG_BLOCK
//	   adr  x1, set               ; set
//	   movz x2, #0                ; oldset = NULL
//	   movz x3, #8                ; sigsetsize
//	   movz x8, #135              ; rt_sigprocmask
//	   svc  #0
//	wait:
//	   adr  x0, set               ; set
//	   movz x1, #0                ; info = NULL
//	   movz x2, #0                ; timeout = NULL (forever)
//	   movz x3, #8                ; sigsetsize
//	   movz x8, #137              ; rt_sigtimedwait
//	   svc  #0
//	   tbnz x0, #63, wait         ; negative errno: wait again
//	   movz x0, #0                ; status 0
//	   movz x8, #94               ; exit_group
//	   svc  #0
//	set: .quad sigset
//
// The encodings were checked against the Go assembler's output for the same
// program (it picks ORR instead of MOVZ for some moves; the MOVZ, ADR, TBNZ
// and SVC words are identical).
func arm64Code() []byte {
	var words []uint32
	movz := func(rd, imm uint32) uint32 { return 0xd2800000 | imm<<5 | rd }
	const svc0 = 0xd4000001
	// adr and tbnz need the offset of set, known once the code is laid out:
	// the program is 16 instructions, then the set.
	const setOff = 16 * 4
	adr := func(rd uint32, at int) uint32 {
		off := uint32(setOff - at) // positive and < 1 MiB
		return 0x10000000 | (off&3)<<29 | (off>>2)<<5 | rd
	}
	tbnz63 := func(rt uint32, at, target int) uint32 {
		imm14 := uint32(int32(target-at)/4) & 0x3fff
		return 1<<31 | 0x37000000 | 31<<19 | imm14<<5 | rt
	}
	words = append(words,
		movz(0, sigBlock),
		adr(1, 4),
		movz(2, 0),
		movz(3, sigsetSize),
		movz(8, 135),
		svc0,
	)
	wait := len(words) * 4
	words = append(words,
		adr(0, wait),
		movz(1, 0),
		movz(2, 0),
		movz(3, sigsetSize),
		movz(8, 137),
		svc0,
	)
	words = append(words, tbnz63(0, len(words)*4, wait))
	words = append(words,
		movz(0, 0),
		movz(8, 94),
		svc0,
	)
	if len(words)*4 != setOff {
		panic("pause: arm64 layout changed; update setOff")
	}
	c := make([]byte, 0, setOff+8)
	for _, w := range words {
		c = binary.LittleEndian.AppendUint32(c, w)
	}
	return binary.LittleEndian.AppendUint64(c, sigset)
}
