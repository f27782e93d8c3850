package pause

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestELFHeaders(t *testing.T) {
	for _, tc := range []struct {
		goarch  string
		machine elf.Machine
	}{
		{"amd64", elf.EM_X86_64},
		{"arm64", elf.EM_AARCH64},
	} {
		t.Run(tc.goarch, func(t *testing.T) {
			b, err := ELF(tc.goarch)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 512 {
				t.Errorf("pause is %d bytes; it should stay tiny", len(b))
			}
			f, err := elf.NewFile(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if f.Machine != tc.machine || f.Type != elf.ET_EXEC || f.Class != elf.ELFCLASS64 {
				t.Errorf("machine %v type %v class %v", f.Machine, f.Type, f.Class)
			}
			if len(f.Progs) != 2 || f.Progs[0].Type != elf.PT_LOAD || f.Progs[0].Filesz != uint64(len(b)) {
				t.Fatalf("program headers %+v", f.Progs)
			}
			if f.Entry != f.Progs[0].Vaddr+codeOff {
				t.Errorf("entry %#x, want %#x", f.Entry, f.Progs[0].Vaddr+codeOff)
			}
			again, _ := ELF(tc.goarch)
			if !bytes.Equal(b, again) {
				t.Error("ELF output differs between calls")
			}
		})
	}
	if _, err := ELF("riscv64"); err == nil {
		t.Error("ELF(riscv64) succeeded")
	}
}

// TestRun runs the program for this machine: it waits, and exits with
// status 0 on SIGTERM or SIGINT.
func TestRun(t *testing.T) {
	b, err := ELF(runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(path)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Signals sent before the mask is installed would kill it
			// (default action), so wait until it waits for them.
			waitWaiting(t, cmd.Process.Pid)
			select {
			case err := <-done:
				t.Fatalf("pause exited on its own: %v", err)
			default:
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("pause after %v: %v, want exit status 0", sig, err)
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("pause still running 10s after %v", sig)
			}
		})
	}
}

// waitWaiting polls /proc/<pid>/wchan until the process sleeps in
// rt_sigtimedwait.
func waitWaiting(t *testing.T, pid int) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		wchan, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "wchan"))
		if err == nil && bytes.Contains(wchan, []byte("sigtimedwait")) {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("pause is not waiting for signals: wchan %q", wchan)
		case <-tick.C:
		}
	}
}
