package hugepages

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/metrics"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Mode is the kernel's transparent huge page mode
// (/sys/kernel/mm/transparent_hugepage/enabled).
type Mode string

const (
	// ModeAlways: every anonymous mapping may get huge pages; nothing to do.
	ModeAlways Mode = "always"
	// ModeMadvise: only mappings advised with MADV_HUGEPAGE get them.
	ModeMadvise Mode = "madvise"
	// ModeNever: no huge pages; nothing can be done.
	ModeNever Mode = "never"
)

// BlockSize is the size of a transparent huge page on the platforms skiff
// runs on (x86-64, and arm64 with 4 KiB base pages).
const BlockSize = 2 << 20

// Advice is what Run asks of the kernel for a range of the process's memory.
type Advice int

const (
	// AdviseHugePages: back the range with huge pages from now on
	// (MADV_HUGEPAGE).
	AdviseHugePages Advice = unix.MADV_HUGEPAGE
	// AdviseCollapse: replace the small pages already in one block with a
	// huge page now (MADV_COLLAPSE).
	AdviseCollapse Advice = unix.MADV_COLLAPSE
)

// Config configures Run. The zero value is usable.
type Config struct {
	// Interval is how often the runtime's mapped memory is checked while it
	// grows (default 1ms): the Go heap grows 4 MiB at a time, and whatever
	// of a new mapping is touched before it is advised takes small pages
	// until Run collapses them. Once nothing has grown for a second, the
	// check slows to IdleInterval (default 50ms).
	Interval, IdleInterval time.Duration
	// From is how much memory the runtime must have mapped
	// (/memory/classes/total:bytes) before Run advises anything (default
	// 0: from the start). A small heap gains little from huge pages and
	// holds its free space in whole 2 MiB blocks; once the memory reaches
	// From, every mapping is advised, and from then on each new one. The
	// blocks in use by then keep their small pages (collapsing them all at
	// once costs more than it saves); the kernel's khugepaged may collapse
	// them later.
	From uint64
	// ModePath and MapsPath default to the kernel's files; tests point them
	// elsewhere.
	ModePath string
	MapsPath string
	// Madvise defaults to madvise(2).
	Madvise func(start, end uintptr, advice Advice) error
	Logger  *slog.Logger
}

func (c *Config) defaults() {
	if c.Interval <= 0 {
		c.Interval = time.Millisecond
	}
	if c.IdleInterval <= 0 {
		c.IdleInterval = 50 * time.Millisecond
	}
	if c.ModePath == "" {
		c.ModePath = "/sys/kernel/mm/transparent_hugepage/enabled"
	}
	if c.MapsPath == "" {
		c.MapsPath = "/proc/self/maps"
	}
	if c.Madvise == nil {
		c.Madvise = madvise
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Run advises the process's anonymous mappings until ctx ends, when the
// kernel's mode is "madvise"; in any other mode (or without the file, as on
// kernels built without THP) it returns nil at once. Each mapping is advised
// once, and the blocks of it already in use then are collapsed. An error
// reading the process's mappings ends Run with that error; advice the kernel
// refuses is logged once and otherwise ignored: the memory keeps its small
// pages.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	mode, err := ReadMode(cfg.ModePath)
	if err != nil || mode != ModeMadvise {
		cfg.Logger.Debug("transparent huge pages left to the kernel", "mode", mode, "err", err)
		return nil
	}
	a := newAdvisor(cfg)
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	var mapped uint64
	var grew time.Time
	armed := cfg.From == 0
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		metrics.Read(sample)
		if now := sample[0].Value.Uint64(); now != mapped {
			if armed || now >= cfg.From {
				raw, err := os.ReadFile(cfg.MapsPath)
				if err != nil {
					return fmt.Errorf("read %s: %w", cfg.MapsPath, err)
				}
				a.scan(raw, armed)
				armed = true
			}
			mapped, grew = now, time.Now()
		}
		if time.Since(grew) < time.Second {
			t.Reset(cfg.Interval)
		} else {
			t.Reset(cfg.IdleInterval)
		}
	}
}

// advisor remembers what it advised, so that each mapping and block is
// advised once.
type advisor struct {
	cfg Config
	// ranges are the mappings of the previous scan, all advised.
	ranges map[Mapping]bool
	// blocks are the 2 MiB blocks (by address) of those mappings: collapsed,
	// or empty when their mapping was advised.
	blocks  map[uintptr]bool
	refused bool
}

func newAdvisor(cfg Config) *advisor {
	return &advisor{cfg: cfg, ranges: map[Mapping]bool{}, blocks: map[uintptr]bool{}}
}

// scan advises the mappings in raw (/proc/self/maps content) that the
// previous scan did not see, and collapses their blocks not seen before
// when collapse is set (otherwise it only notes them).
// Mappings advised earlier that have merged with their neighbours show up as
// new ranges; advising them again is a no-op for the kernel, and their blocks
// are known.
func (a *advisor) scan(raw []byte, collapse bool) {
	ranges := make(map[Mapping]bool, len(a.ranges))
	blocks := make(map[uintptr]bool, len(a.blocks))
	for _, m := range AnonymousMappings(raw) {
		ranges[m] = true
		if !a.ranges[m] {
			a.advise(m.Start, m.End, AdviseHugePages)
		}
		for b := alignUp(m.Start); b+BlockSize <= m.End; b += BlockSize {
			blocks[b] = true
			if collapse && !a.blocks[b] {
				// Fails for a block nothing has touched yet, which is
				// fine: its first touch now takes a huge page.
				_ = a.cfg.Madvise(b, b+BlockSize, AdviseCollapse)
			}
		}
	}
	a.ranges, a.blocks = ranges, blocks
}

func (a *advisor) advise(start, end uintptr, advice Advice) {
	if err := a.cfg.Madvise(start, end, advice); err != nil && !a.refused {
		a.refused = true
		a.cfg.Logger.Info("kernel refused huge pages for a mapping", "start", fmt.Sprintf("%#x", start), "end", fmt.Sprintf("%#x", end), "err", err)
	}
}

func alignUp(p uintptr) uintptr { return (p + BlockSize - 1) &^ (BlockSize - 1) }

// Mapping is an address range [Start, End) of the process.
type Mapping struct{ Start, End uintptr }

// AnonymousMappings returns the private, readable and writable mappings of
// /proc/<pid>/maps content that no file backs and that hold at least one
// aligned 2 MiB block: the memory the kernel would give huge pages in mode
// "always". Named mappings ([stack], [heap] of the C allocator, [vdso]…) are
// left out; malformed lines are skipped.
func AnonymousMappings(maps []byte) []Mapping {
	var out []Mapping
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		f := bytes.Fields(sc.Bytes())
		if len(f) != 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
			continue
		}
		dash := bytes.IndexByte(f[0], '-')
		if dash < 0 {
			continue
		}
		start, err1 := strconv.ParseUint(string(f[0][:dash]), 16, 64)
		end, err2 := strconv.ParseUint(string(f[0][dash+1:]), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		if alignUp(uintptr(start))+BlockSize > uintptr(end) {
			continue
		}
		out = append(out, Mapping{Start: uintptr(start), End: uintptr(end)})
	}
	return out
}

// ReadMode reads the kernel's transparent huge page mode from path (the
// bracketed word of "always [madvise] never").
func ReadMode(path string) (Mode, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	open, end := bytes.IndexByte(raw, '['), bytes.IndexByte(raw, ']')
	if open < 0 || end < open {
		return "", fmt.Errorf("%s: no mode in %q", path, bytes.TrimSpace(raw))
	}
	return Mode(raw[open+1 : end]), nil
}

// madvise calls madvise(2) on a range given by address: the process's own
// memory, read from its maps, not a Go object.
func madvise(start, end uintptr, advice Advice) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, start, end-start, uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}
