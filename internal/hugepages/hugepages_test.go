package hugepages

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

const mb = 1 << 20

// mapsLine renders one line of /proc/<pid>/maps.
func mapsLine(start, end uintptr, perms, inode, path string) string {
	return strings.TrimRight(fmt.Sprintf("%x-%x %s 00000000 00:00 %s %s", start, end, perms, inode, path), " ")
}

func TestAnonymousMappings(t *testing.T) {
	const base = 0xc000000000 // 2 MiB aligned
	tests := []struct {
		name  string
		lines []string
		want  []Mapping
	}{
		{
			name:  "anonymous private rw with an aligned block",
			lines: []string{mapsLine(base, base+4*mb, "rw-p", "0", "")},
			want:  []Mapping{{base, base + 4*mb}},
		},
		{
			name:  "unaligned but holding one aligned block",
			lines: []string{mapsLine(base+4096, base+4*mb+4096, "rw-p", "0", "")},
			want:  []Mapping{{base + 4096, base + 4*mb + 4096}},
		},
		{
			name:  "2 MiB long without an aligned block",
			lines: []string{mapsLine(base+4096, base+2*mb+4096, "rw-p", "0", "")},
		},
		{
			name:  "smaller than a block",
			lines: []string{mapsLine(base, base+mb, "rw-p", "0", "")},
		},
		{
			name: "file, shared, read-only, reserved and named mappings",
			lines: []string{
				mapsLine(base, base+4*mb, "r--s", "9978003", "/var/lib/skiff/etcd/member/snap/db"),
				mapsLine(base, base+4*mb, "rw-p", "9978003", "/usr/bin/skiff"),
				mapsLine(base, base+4*mb, "rw-s", "0", ""),
				mapsLine(base, base+4*mb, "r--p", "0", ""),
				mapsLine(base, base+4*mb, "---p", "0", ""),
				mapsLine(base, base+4*mb, "rw-p", "0", "[stack]"),
				mapsLine(base, base+4*mb, "rw-p", "0", "[heap]"),
			},
		},
		{
			name: "malformed lines are skipped",
			lines: []string{
				"",
				"garbage",
				"c000000000 rw-p 00000000 00:00 0",
				"zz-c000400000 rw-p 00000000 00:00 0",
				"c000400000-c000000000 rw-p 00000000 00:00 0",
				mapsLine(base, base+4*mb, "rw-p", "0", ""),
			},
			want: []Mapping{{base, base + 4*mb}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AnonymousMappings([]byte(strings.Join(tt.lines, "\n") + "\n"))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("AnonymousMappings = %x, want %x", got, tt.want)
			}
		})
	}
}

func FuzzAnonymousMappings(f *testing.F) {
	f.Add([]byte(mapsLine(0xc000000000, 0xc000400000, "rw-p", "0", "") + "\n"))
	f.Add([]byte("7ffcc643a000-7ffcc645b000 rw-p 00000000 00:00 0                          [stack]\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, m := range AnonymousMappings(raw) {
			if m.End <= m.Start || alignUp(m.Start)+BlockSize > m.End {
				t.Fatalf("mapping %x holds no aligned block", m)
			}
		}
	})
}

func TestReadMode(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		content string
		want    Mode
		wantErr bool
	}{
		{content: "always [madvise] never\n", want: ModeMadvise},
		{content: "[always] madvise never\n", want: ModeAlways},
		{content: "always madvise [never]\n", want: ModeNever},
		{content: "always madvise never\n", wantErr: true},
		{content: "", wantErr: true},
	}
	for i, tt := range tests {
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadMode(path)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ReadMode(%q) = %q, %v; want %q, error %v", tt.content, got, err, tt.want, tt.wantErr)
		}
	}
	if _, err := ReadMode(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadMode of a missing file: no error")
	}
}

// call is one madvise a fake recorded.
type call struct {
	Start, End uintptr
	Advice     Advice
}

type recorder struct {
	mu    sync.Mutex
	calls []call
	err   error
}

func (r *recorder) madvise(start, end uintptr, advice Advice) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{start, end, advice})
	return r.err
}

func (r *recorder) take() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func TestAdvisorScan(t *testing.T) {
	const a, b = 0xc000000000, 0xc100000000
	rec := &recorder{}
	adv := newAdvisor(Config{Madvise: rec.madvise})
	maps := func(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }
	collapse := func(start uintptr) call { return call{start, start + BlockSize, AdviseCollapse} }

	steps := []struct {
		name string
		maps []byte
		want []call
	}{
		{
			name: "first scan advises every mapping and collapses its blocks",
			maps: maps(mapsLine(a, a+4*mb, "rw-p", "0", ""), mapsLine(b, b+2*mb, "rw-p", "0", "")),
			want: []call{
				{a, a + 4*mb, AdviseHugePages}, collapse(a), collapse(a + 2*mb),
				{b, b + 2*mb, AdviseHugePages}, collapse(b),
			},
		},
		{
			name: "nothing new, nothing advised",
			maps: maps(mapsLine(a, a+4*mb, "rw-p", "0", ""), mapsLine(b, b+2*mb, "rw-p", "0", "")),
		},
		{
			name: "a grown mapping is advised again, only its new blocks collapsed",
			maps: maps(mapsLine(a, a+8*mb, "rw-p", "0", ""), mapsLine(b, b+2*mb, "rw-p", "0", "")),
			want: []call{{a, a + 8*mb, AdviseHugePages}, collapse(a + 4*mb), collapse(a + 6*mb)},
		},
		{
			name: "a mapping gone and back is new again",
			maps: maps(mapsLine(a, a+8*mb, "rw-p", "0", "")),
		},
		{
			maps: maps(mapsLine(a, a+8*mb, "rw-p", "0", ""), mapsLine(b, b+2*mb, "rw-p", "0", "")),
			want: []call{{b, b + 2*mb, AdviseHugePages}, collapse(b)},
		},
	}
	for _, s := range steps {
		adv.scan(s.maps, true)
		if got := rec.take(); !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: madvise calls\n got %x\nwant %x", s.name, got, s.want)
		}
	}
}

// A scan without collapse advises the mappings and notes their blocks, so
// that later scans collapse only blocks that are new.
func TestAdvisorScanWithoutCollapse(t *testing.T) {
	const a = 0xc000000000
	rec := &recorder{}
	adv := newAdvisor(Config{Madvise: rec.madvise})
	adv.scan([]byte(mapsLine(a, a+4*mb, "rw-p", "0", "")+"\n"), false)
	if got, want := rec.take(), []call{{a, a + 4*mb, AdviseHugePages}}; !reflect.DeepEqual(got, want) {
		t.Errorf("first scan: madvise calls\n got %x\nwant %x", got, want)
	}
	adv.scan([]byte(mapsLine(a, a+6*mb, "rw-p", "0", "")+"\n"), true)
	if got, want := rec.take(), []call{{a, a + 6*mb, AdviseHugePages}, {a + 4*mb, a + 6*mb, AdviseCollapse}}; !reflect.DeepEqual(got, want) {
		t.Errorf("grown mapping: madvise calls\n got %x\nwant %x", got, want)
	}
}

func TestAdvisorScanRefused(t *testing.T) {
	var logs bytes.Buffer
	rec := &recorder{err: errors.New("operation not permitted")}
	adv := newAdvisor(Config{Madvise: rec.madvise})
	adv.cfg.defaults()
	adv.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	adv.scan([]byte(mapsLine(0xc000000000, 0xc000400000, "rw-p", "0", "")+"\n"+mapsLine(0xc100000000, 0xc100400000, "rw-p", "0", "")+"\n"), true)
	if n := strings.Count(logs.String(), "kernel refused huge pages"); n != 1 {
		t.Errorf("refusals logged %d times, want once:\n%s", n, logs.String())
	}
	if got := len(rec.take()); got != 6 {
		t.Errorf("%d madvise calls, want 6 (advice and two collapses per mapping)", got)
	}
}

func writeMode(t *testing.T, mode string) string {
	path := filepath.Join(t.TempDir(), "enabled")
	if err := os.WriteFile(path, []byte(mode+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunLeavesOtherModesAlone(t *testing.T) {
	for _, mode := range []string{"[always] madvise never", "always madvise [never]"} {
		rec := &recorder{}
		err := Run(context.Background(), Config{
			ModePath: writeMode(t, mode),
			MapsPath: filepath.Join(t.TempDir(), "missing"),
			Madvise:  rec.madvise,
		})
		if err != nil || len(rec.take()) != 0 {
			t.Errorf("mode %q: Run = %v with madvise calls; want nil at once, no calls", mode, err)
		}
	}
	if err := Run(context.Background(), Config{ModePath: filepath.Join(t.TempDir(), "missing")}); err != nil {
		t.Errorf("without the mode file: Run = %v, want nil", err)
	}
}

func TestRunMapsUnreadable(t *testing.T) {
	err := Run(context.Background(), Config{
		ModePath: writeMode(t, "always [madvise] never"),
		MapsPath: filepath.Join(t.TempDir(), "missing"),
		Madvise:  (&recorder{}).madvise,
	})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Run = %v, want the error reading the maps", err)
	}
}

// sink keeps the test's allocation alive and on the heap.
var sink []byte

// TestRunAdvisesTheHeap runs the advisor on this process's own mappings with
// a recording madvise: the mapping that holds a fresh 16 MiB heap object is
// advised, and Run ends with its context.
func TestRunAdvisesTheHeap(t *testing.T) {
	sink = make([]byte, 16*mb)
	addr := uintptr(unsafe.Pointer(&sink[0]))
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ModePath: writeMode(t, "always [madvise] never"), Madvise: rec.madvise})
	}()
	advised := waitAdvised(rec, addr)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if !advised {
		t.Errorf("the mapping of heap address %#x was not advised", addr)
	}
}

// TestRunFrom: with From above what the runtime has mapped, nothing is
// advised; once the heap grows past it, the mapping of the new memory is.
func TestRunFrom(t *testing.T) {
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(sample)
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ModePath: writeMode(t, "always [madvise] never"), Madvise: rec.madvise, From: sample[0].Value.Uint64() + 64*mb})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	sink = make([]byte, 4*mb)
	time.Sleep(200 * time.Millisecond)
	if calls := rec.take(); len(calls) != 0 {
		t.Fatalf("below From: %d madvise calls, want none", len(calls))
	}
	sink = make([]byte, 128*mb)
	addr := uintptr(unsafe.Pointer(&sink[0]))
	advised := waitAdvised(rec, addr)
	if !advised {
		t.Errorf("past From: the mapping of heap address %#x was not advised", addr)
	}
}

// waitAdvised reports whether rec sees the mapping that holds addr advised
// for huge pages within ten seconds.
func waitAdvised(rec *recorder, addr uintptr) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, c := range rec.take() {
			if c.Advice == AdviseHugePages && c.Start <= addr && addr < c.End {
				return true
			}
		}
	}
	return false
}

// TestRunOnThisKernel runs the advisor with the real madvise on this process.
// In mode "madvise" the mapping that holds a fresh heap object must carry the
// kernel's huge page flag ("hg" in smaps' VmFlags) afterwards; in any other
// mode Run must return at once.
func TestRunOnThisKernel(t *testing.T) {
	mode, err := ReadMode("/sys/kernel/mm/transparent_hugepage/enabled")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	sink = make([]byte, 16*mb)
	addr := uintptr(unsafe.Pointer(&sink[0]))
	start := time.Now()
	if err := Run(ctx, Config{}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err != nil || mode != ModeMadvise {
		if time.Since(start) >= 200*time.Millisecond {
			t.Errorf("mode %q (%v): Run waited for its context instead of returning", mode, err)
		}
		return
	}
	flags, err := vmFlags(addr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("mapping of heap address %#x: VmFlags %q, want hg", addr, flags)
	}
}

// vmFlags returns the VmFlags line of /proc/self/smaps for the mapping that
// holds addr.
func vmFlags(addr uintptr) (string, error) {
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	var in bool
	for _, line := range strings.Split(string(raw), "\n") {
		var start, end uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &start, &end); n == 2 {
			in = start <= addr && addr < end
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	return "", fmt.Errorf("no mapping holds %#x", addr)
}
