package crilogs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"k8s.io/utils/clock"
)

// Default intervals of Follow.
const (
	// DefaultPollInterval is how often a followed file is checked for new lines.
	DefaultPollInterval = 100 * time.Millisecond
	// DefaultRunningInterval is how often, while a followed file does not grow, the
	// container is asked whether it still runs.
	DefaultRunningInterval = time.Second
)

// Options select what Read copies; they are the kubelet's reading of v1.PodLogOptions.
type Options struct {
	// TailLines, when not negative, starts at the last TailLines lines of the file
	// (0: none, so a follow starts at the end); negative reads the whole file.
	TailLines int64
	// LimitBytes, when positive, ends the copy after that many bytes of output.
	LimitBytes int64
	// Since skips lines stamped before it; the zero time skips none.
	Since time.Time
	// Timestamps prefixes each line of output with its time in TimeFormat and a space
	// (continuations of a partial line get none).
	Timestamps bool
	// Follow keeps copying lines as they are written until Running reports false (then
	// what is left is copied), ctx ends, or the byte limit is reached.
	Follow bool
	// Running says whether the container still runs. Follow calls it at each end of
	// file that follows new data, and at most every RunningInterval otherwise. Nil means
	// the container runs until ctx ends. An error ends the copy with that error.
	Running func(ctx context.Context) (bool, error)
	// Clock paces Follow; nil means the real clock.
	Clock clock.WithTicker
	// PollInterval and RunningInterval default to DefaultPollInterval and
	// DefaultRunningInterval.
	PollInterval, RunningInterval time.Duration
}

// errLimit stops the copy once LimitBytes were written.
var errLimit = errors.New("byte limit reached")

// Read copies the messages of the CRI log file at path to stdout and stderr by stream,
// as the options say. A nil writer drops its stream, which then does not count toward
// LimitBytes. Unparsable lines are skipped. Without Follow, a last line with no newline
// is copied as it is; with Follow, it is held back until the runtime finishes it. It
// returns nil when the copy is complete (end of file, container stopped, limit reached),
// ctx.Err() when ctx ended first, or the error of a read, a write or Running. A file
// that is replaced (log rotation) while followed is read to its end and then reopened.
func Read(ctx context.Context, path string, opts Options, stdout, stderr io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	defer func() { f.Close() }()
	start, err := tailStart(f, opts.TailLines)
	if err != nil {
		return fmt.Errorf("log file %s: %w", path, err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("log file %s: %w", path, err)
	}
	w := &lineWriter{opts: &opts, stdout: stdout, stderr: stderr, newLine: map[Stream]bool{Stdout: true, Stderr: true}}
	if opts.LimitBytes > 0 {
		w.remain = opts.LimitBytes
	} else {
		w.remain = -1
	}
	// Without Follow, the lines that were there when tailing counted are the output.
	linesLeft := int64(-1)
	if !opts.Follow && opts.TailLines >= 0 {
		linesLeft = opts.TailLines
	}
	r := bufio.NewReaderSize(f, 64*1024)
	var f2 *follower
	if opts.Follow {
		f2 = newFollower(ctx, &opts)
		defer f2.stop()
	}
	var pending []byte // a line without its newline yet, while following
	for linesLeft != 0 {
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Longer than the buffer: gather the whole line.
			pending = append(pending, chunk...)
			continue
		}
		if err == nil {
			line := chunk
			if len(pending) > 0 {
				line = append(pending, chunk...)
				pending = pending[:0]
			}
			if werr := w.write(line); werr != nil {
				return finish(werr)
			}
			if linesLeft > 0 {
				linesLeft--
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("read log file %s: %w", path, err)
		}
		pending = append(pending, chunk...)
		if !opts.Follow {
			if len(pending) > 0 {
				return finish(w.write(pending))
			}
			return nil
		}
		// End of what is written so far: wait for more, a rotation, or the end.
		next, more, err := f2.wait(path, f)
		if err != nil {
			return err
		}
		if next != nil {
			// Rotated: the old file is read to its end (we are there), then the new one.
			f.Close()
			f, pending = next, pending[:0]
			r.Reset(f)
			continue
		}
		if !more {
			// Stopped: copy what is left, complete lines or not, and end.
			rest, rerr := io.ReadAll(r)
			if rerr != nil {
				return fmt.Errorf("read log file %s: %w", path, rerr)
			}
			pending = append(pending, rest...)
			for _, line := range bytes.SplitAfter(pending, []byte{'\n'}) {
				if len(line) == 0 {
					continue
				}
				if werr := w.write(line); werr != nil {
					return finish(werr)
				}
			}
			return nil
		}
	}
	return nil
}

// finish maps the end of a copy to Read's result.
func finish(err error) error {
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// lineWriter parses lines and writes their messages per the options.
type lineWriter struct {
	opts           *Options
	stdout, stderr io.Writer
	remain         int64 // bytes left to write; -1 for no limit
	// newLine tells, per stream, whether the next message starts a line of output
	// (the previous one was not partial), for the timestamp prefix.
	newLine map[Stream]bool
}

func (w *lineWriter) write(raw []byte) error {
	l, err := ParseLine(raw)
	if err != nil {
		slog.Debug("skip unparsable container log line", "err", err)
		return nil
	}
	startsLine := w.newLine[l.Stream]
	w.newLine[l.Stream] = !l.Partial
	if l.Time.Before(w.opts.Since) {
		return nil
	}
	out := w.stdout
	if l.Stream == Stderr {
		out = w.stderr
	}
	if out == nil {
		return nil
	}
	msg := l.Message
	if w.opts.Timestamps && startsLine {
		msg = append([]byte(l.Time.Format(TimeFormat)+" "), msg...)
	}
	if w.remain >= 0 && int64(len(msg)) > w.remain {
		msg = msg[:w.remain]
	}
	n, err := out.Write(msg)
	if w.remain >= 0 {
		w.remain -= int64(n)
	}
	if err != nil {
		return err
	}
	if n < len(msg) {
		return io.ErrShortWrite
	}
	if w.remain == 0 {
		return errLimit
	}
	return nil
}

// tailStart returns the offset of the first of the last n lines of f (a last line without
// a newline counts), 0 when n is negative or the file has no more lines, the size
// when n is 0.
func tailStart(f io.ReadSeeker, n int64) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, nil
	}
	if n == 0 {
		return size, nil
	}
	const block = 4096
	buf := make([]byte, block)
	pos := size
	for pos > 0 {
		chunk := int64(block)
		if pos < chunk {
			chunk = pos
		}
		pos -= chunk
		if _, err := f.Seek(pos, io.SeekStart); err != nil {
			return 0, err
		}
		b := buf[:chunk]
		if _, err := io.ReadFull(f, b); err != nil {
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			if pos+int64(i) == size-1 {
				// The newline that ends the last line starts no line.
				continue
			}
			n--
			if n == 0 {
				return pos + int64(i) + 1, nil
			}
		}
	}
	return 0, nil
}

// follower waits for a followed file to grow.
type follower struct {
	ctx         context.Context
	opts        *Options
	clock       clock.WithTicker
	ticker      clock.Ticker
	lastRunning time.Time
	checked     bool // Running was asked since the last new data
}

func newFollower(ctx context.Context, opts *Options) *follower {
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	poll := opts.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	if opts.RunningInterval <= 0 {
		opts.RunningInterval = DefaultRunningInterval
	}
	return &follower{ctx: ctx, opts: opts, clock: c, ticker: c.NewTicker(poll)}
}

func (fw *follower) stop() { fw.ticker.Stop() }

// wait returns once f (open at its end) may have grown: more is true to read on, false
// when the container stopped; next is the file now at path when the old one was replaced.
func (fw *follower) wait(path string, f *os.File) (next *os.File, more bool, err error) {
	for {
		if grown, err := hasMore(f); err != nil {
			return nil, false, err
		} else if grown {
			fw.checked = false
			return nil, true, nil
		}
		if nf, err := reopened(path, f); err != nil {
			return nil, false, err
		} else if nf != nil {
			fw.checked = false
			return nf, true, nil
		}
		now := fw.clock.Now()
		if fw.opts.Running != nil && (!fw.checked || now.Sub(fw.lastRunning) >= fw.opts.RunningInterval) {
			fw.checked, fw.lastRunning = true, now
			running, err := fw.opts.Running(fw.ctx)
			if err != nil {
				return nil, false, err
			}
			if !running {
				return nil, false, nil
			}
		}
		select {
		case <-fw.ctx.Done():
			return nil, false, fw.ctx.Err()
		case <-fw.ticker.C():
		}
	}
}

// hasMore reports whether f's size is past its current offset.
func hasMore(f *os.File) (bool, error) {
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return false, err
	}
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	return st.Size() > off, nil
}

// reopened returns the file now at path when it is not f any more (rotation, or
// truncation to below the read offset), else nil. A missing path is not an error: the
// runtime is about to create the new file.
func reopened(path string, f *os.File) (*os.File, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cur, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if os.SameFile(st, cur) {
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil || st.Size() >= off {
			return nil, err
		}
		// Truncated in place (copytruncate): start again at the beginning.
		return os.Open(path)
	}
	nf, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return nf, err
}
