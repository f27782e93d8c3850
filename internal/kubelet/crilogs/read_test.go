package crilogs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name        string
		raw         string
		wantTime    string
		wantStream  Stream
		wantPartial bool
		wantMessage string
		wantErr     bool
	}{
		{name: "full", raw: "2016-10-06T00:17:09.669794202Z stdout F hello world\n", wantTime: "2016-10-06T00:17:09.669794202Z", wantStream: Stdout, wantMessage: "hello world\n"},
		{name: "full without newline", raw: "2016-10-06T00:17:09.669794202Z stderr F oops", wantTime: "2016-10-06T00:17:09.669794202Z", wantStream: Stderr, wantMessage: "oops\n"},
		{name: "partial", raw: "2016-10-06T00:17:09.669794202Z stdout P part one\n", wantTime: "2016-10-06T00:17:09.669794202Z", wantStream: Stdout, wantPartial: true, wantMessage: "part one"},
		{name: "short fraction and offset", raw: "2016-10-06T02:17:09.5+02:00 stdout F x\n", wantTime: "2016-10-06T00:17:09.5Z", wantStream: Stdout, wantMessage: "x\n"},
		{name: "extra tags", raw: "2016-10-06T00:17:09Z stdout F:x:y msg\n", wantTime: "2016-10-06T00:17:09Z", wantStream: Stdout, wantMessage: "msg\n"},
		{name: "empty message", raw: "2016-10-06T00:17:09Z stdout F\n", wantTime: "2016-10-06T00:17:09Z", wantStream: Stdout, wantMessage: "\n"},
		{name: "message with spaces kept", raw: "2016-10-06T00:17:09Z stdout F  two  spaces \n", wantTime: "2016-10-06T00:17:09Z", wantStream: Stdout, wantMessage: " two  spaces \n"},
		{name: "bad time", raw: "yesterday stdout F x\n", wantErr: true},
		{name: "bad stream", raw: "2016-10-06T00:17:09Z stdin F x\n", wantErr: true},
		{name: "no stream", raw: "2016-10-06T00:17:09Z\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseLine([]byte(tt.raw))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error, got %+v", l)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, _ := time.Parse(time.RFC3339Nano, tt.wantTime)
			if !l.Time.Equal(want) || l.Stream != tt.wantStream || l.Partial != tt.wantPartial || string(l.Message) != tt.wantMessage {
				t.Errorf("got %v %s partial=%t %q, want %v %s partial=%t %q", l.Time, l.Stream, l.Partial, l.Message, want, tt.wantStream, tt.wantPartial, tt.wantMessage)
			}
		})
	}
}

// logFile is the fixture most Read tests use: three seconds of output on both
// streams, one message split over two partial lines.
const logFile = `2024-01-01T00:00:01.000000000Z stdout F one
2024-01-01T00:00:01.500000000Z stderr F err-one
2024-01-01T00:00:02.000000000Z stdout P two-a
2024-01-01T00:00:02.100000000Z stdout F two-b
2024-01-01T00:00:03.000000000Z stdout F three
garbage line
2024-01-01T00:00:04.000000000Z stderr F err-two
`

func writeLog(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestRead(t *testing.T) {
	tests := []struct {
		name       string
		content    string
		opts       Options
		noStderr   bool
		wantStdout string
		wantStderr string
	}{
		{name: "all", content: logFile, opts: Options{TailLines: -1},
			wantStdout: "one\ntwo-atwo-b\nthree\n", wantStderr: "err-one\nerr-two\n"},
		{name: "tail 2", content: logFile, opts: Options{TailLines: 2},
			wantStderr: "err-two\n"}, // the garbage line counts as a line of the file
		{name: "tail 3", content: logFile, opts: Options{TailLines: 3},
			wantStdout: "three\n", wantStderr: "err-two\n"},
		{name: "tail 0", content: logFile, opts: Options{TailLines: 0}},
		{name: "tail more than the file", content: logFile, opts: Options{TailLines: 100},
			wantStdout: "one\ntwo-atwo-b\nthree\n", wantStderr: "err-one\nerr-two\n"},
		{name: "tail splits a partial message", content: logFile, opts: Options{TailLines: 4},
			wantStdout: "two-b\nthree\n", wantStderr: "err-two\n"},
		{name: "since", content: logFile, opts: Options{TailLines: -1, Since: at("2024-01-01T00:00:02.05Z")},
			wantStdout: "two-b\nthree\n", wantStderr: "err-two\n"},
		{name: "since equal is kept", content: logFile, opts: Options{TailLines: -1, Since: at("2024-01-01T00:00:03Z")},
			wantStdout: "three\n", wantStderr: "err-two\n"},
		{name: "tail then since", content: logFile, opts: Options{TailLines: 3, Since: at("2024-01-01T00:00:03.5Z")},
			wantStderr: "err-two\n"},
		{name: "timestamps", content: logFile, opts: Options{TailLines: -1, Timestamps: true},
			wantStdout: "2024-01-01T00:00:01.000000000Z one\n2024-01-01T00:00:02.000000000Z two-atwo-b\n2024-01-01T00:00:03.000000000Z three\n",
			wantStderr: "2024-01-01T00:00:01.500000000Z err-one\n2024-01-01T00:00:04.000000000Z err-two\n"},
		{name: "limit bytes cuts a message", content: logFile, opts: Options{TailLines: -1, LimitBytes: 6},
			wantStdout: "one\n", wantStderr: "er"},
		{name: "limit bytes exact", content: logFile, opts: Options{TailLines: -1, LimitBytes: 4},
			wantStdout: "one\n"},
		{name: "stdout only", content: logFile, opts: Options{TailLines: -1, LimitBytes: 8}, noStderr: true,
			wantStdout: "one\ntwo-"},
		{name: "last line without newline", content: "2024-01-01T00:00:01Z stdout F a\n2024-01-01T00:00:02Z stdout F b", opts: Options{TailLines: -1},
			wantStdout: "a\nb\n"},
		{name: "tail counts a last line without newline", content: "2024-01-01T00:00:01Z stdout F a\n2024-01-01T00:00:02Z stdout F b", opts: Options{TailLines: 1},
			wantStdout: "b\n"},
		{name: "empty file", content: "", opts: Options{TailLines: 10}},
		{name: "long line", content: "2024-01-01T00:00:01Z stdout F " + strings.Repeat("x", 200000) + "\n", opts: Options{TailLines: 1},
			wantStdout: strings.Repeat("x", 200000) + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeLog(t, tt.content)
			var stdout, stderr bytes.Buffer
			var errW io.Writer = &stderr
			if tt.noStderr {
				errW = nil
			}
			if err := Read(context.Background(), path, tt.opts, &stdout, errW); err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tt.wantStdout || stderr.String() != tt.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	err := Read(context.Background(), filepath.Join(t.TempDir(), "nope.log"), Options{TailLines: -1}, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err %v, want not exist", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls until cond holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func appendLog(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// follow starts Read with Follow in the background against a container whose
// running state the test controls.
func follow(t *testing.T, path string, opts Options) (out *syncBuffer, running *atomic.Bool, done chan error, cancel func()) {
	t.Helper()
	out = &syncBuffer{}
	running = &atomic.Bool{}
	running.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opts.Follow = true
	opts.PollInterval = 2 * time.Millisecond
	opts.RunningInterval = 5 * time.Millisecond
	opts.Running = func(context.Context) (bool, error) { return running.Load(), nil }
	done = make(chan error, 1)
	go func() { done <- Read(ctx, path, opts, out, out) }()
	return out, running, done, cancel
}

func waitDone(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return")
		return nil
	}
}

func TestFollow(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F old\n2024-01-01T00:00:02Z stdout F last\n")
	out, running, done, _ := follow(t, path, Options{TailLines: 1})
	waitFor(t, "the tail", func() bool { return out.String() == "last\n" })

	// A line written in two steps is only copied once complete.
	appendLog(t, path, "2024-01-01T00:00:03Z stdout F new")
	appendLog(t, path, "er\n2024-01-01T00:00:04Z stderr P a")
	waitFor(t, "newer line", func() bool { return out.String() == "last\nnewer\n" })
	appendLog(t, path, "\n2024-01-01T00:00:05Z stderr F b\n")
	waitFor(t, "partial message", func() bool { return out.String() == "last\nnewer\nab\n" })

	// The container stops: what it wrote last is copied, then Read ends.
	appendLog(t, path, "2024-01-01T00:00:06Z stdout F bye\n")
	running.Store(false)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "last\nnewer\nab\nbye\n" {
		t.Errorf("output %q", got)
	}
}

func TestFollowExitedContainerEndsAtOnce(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F a\n2024-01-01T00:00:02Z stdout F b")
	out, running, done, _ := follow(t, path, Options{TailLines: -1})
	running.Store(false)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a\nb\n" {
		t.Errorf("output %q", got)
	}
}

func TestFollowCancel(t *testing.T) {
	path := writeLog(t, "")
	_, _, done, cancel := follow(t, path, Options{TailLines: -1})
	cancel()
	if err := waitDone(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}

func TestFollowLimitBytes(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F abc\n")
	out, _, done, _ := follow(t, path, Options{TailLines: -1, LimitBytes: 6})
	waitFor(t, "first line", func() bool { return out.String() == "abc\n" })
	appendLog(t, path, "2024-01-01T00:00:02Z stdout F defgh\n")
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "abc\nde" {
		t.Errorf("output %q", got)
	}
}

func TestFollowRotation(t *testing.T) {
	path := writeLog(t, "2024-01-01T00:00:01Z stdout F before\n")
	out, running, done, _ := follow(t, path, Options{TailLines: -1})
	waitFor(t, "first line", func() bool { return out.String() == "before\n" })
	appendLog(t, path, "2024-01-01T00:00:02Z stdout F rotated-away\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendLog(t, path, "2024-01-01T00:00:03Z stdout F after\n")
	waitFor(t, "line of the new file", func() bool { return out.String() == "before\nrotated-away\nafter\n" })
	running.Store(false)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestFollowRunningError(t *testing.T) {
	path := writeLog(t, "")
	boom := errors.New("runtime down")
	opts := Options{TailLines: -1, Follow: true, PollInterval: time.Millisecond,
		Running: func(context.Context) (bool, error) { return false, boom }}
	if err := Read(context.Background(), path, opts, &bytes.Buffer{}, nil); !errors.Is(err, boom) {
		t.Errorf("err %v, want %v", err, boom)
	}
}
